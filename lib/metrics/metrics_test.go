package metrics

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func sample() *Registry {
	r := NewRegistry()
	c := r.NewCounter("crd_blocked_total", "Blocked cycles,\nby reason.", "reason")
	c.Inc("window")
	c.Inc("window")
	c.Add(3, `he said "hi"\n`)
	c.Add(-1, "window") // ignored
	c.Touch("health")
	g := r.NewGauge("crd_required", "1 when needed.")
	g.Set(1)
	h := r.NewHistogram("crd_wait_seconds", "Wait.", []float64{1, 0.1, 10})
	h.Observe(0.05)
	h.Observe(5)
	h.Observe(100)
	return r
}

// The output parses with Prometheus' own text parser, with the values written.
func TestExpositionParses(t *testing.T) {
	var buf bytes.Buffer
	n, err := sample().WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("n %d err %v", n, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	blocked := fams["crd_blocked_total"]
	if blocked == nil || blocked.GetHelp() != "Blocked cycles,\nby reason." || len(blocked.Metric) != 3 {
		t.Fatalf("%v", blocked)
	}
	values := map[string]float64{}
	for _, m := range blocked.Metric {
		values[m.Label[0].GetValue()] = m.Counter.GetValue()
	}
	if values["window"] != 2 || values["health"] != 0 || values[`he said "hi"\n`] != 3 {
		t.Errorf("values %v", values)
	}
	if g := fams["crd_required"]; g.Metric[0].Gauge.GetValue() != 1 {
		t.Errorf("gauge %v", g)
	}
	h := fams["crd_wait_seconds"].Metric[0].Histogram
	if h.GetSampleCount() != 3 || h.GetSampleSum() != 105.05 || len(h.Bucket) != 4 {
		t.Fatalf("histogram %v", h)
	}
	wantCum := []uint64{1, 1, 2, 3} // <=0.1, <=1, <=10, +Inf
	for i, b := range h.Bucket {
		if b.GetCumulativeCount() != wantCum[i] {
			t.Errorf("bucket %v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), wantCum[i])
		}
	}
	if !strings.Contains(buf.String(), `crd_wait_seconds_bucket{le="+Inf"} 3`) {
		t.Errorf("no +Inf bucket:\n%s", buf.String())
	}
}

func TestValuesAndDuplicates(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounter("a_total", "A.", "x")
	c.Inc("1")
	if c2 := r.NewCounter("a_total", "A again.", "x"); c2.Value("1") != 1 {
		t.Error("a duplicate registration must share the family")
	}
	g := r.NewGauge("g", "G.", "k")
	g.Set(2.5, "v", "extra-ignored")
	if g.Value("v") != 2.5 {
		t.Error(g.Value("v"))
	}
	h := r.NewHistogram("h", "H.", nil)
	h.Observe(1)
	if h.Count() != 1 {
		t.Error(h.Count())
	}
	if formatFloat(math.Inf(1)) != "+Inf" || formatFloat(math.Inf(-1)) != "-Inf" || formatFloat(zero()/zero()) != "NaN" {
		t.Error("special floats")
	}
}

func zero() float64 { return 0 }

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "crd.prom")
	if err := sample().WriteFile(p); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil || !strings.HasPrefix(string(data), "# HELP crd_blocked_total") {
		t.Fatalf("%s %v", data, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	if err := sample().WriteFile(filepath.Join(dir, "missing", "x.prom")); err == nil {
		t.Error("no error for a missing directory")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteToError(t *testing.T) {
	if _, err := sample().WriteTo(failWriter{}); err == nil {
		t.Fatal("no error")
	}
}
