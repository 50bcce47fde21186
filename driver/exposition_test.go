package driver

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crddetect"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// exposition is one text exposition the project writes, parsed by the real
// Prometheus parser.
type exposition struct {
	name     string
	families map[string]*dto.MetricFamily
}

// parseExposition fails the test when Prometheus' own text parser rejects
// data (node_exporter's textfile collector uses the same parser).
func parseExposition(t *testing.T, name string, data []byte) exposition {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: the Prometheus parser rejects it: %v\n%s", name, err, data)
	}
	for n, f := range families {
		if f.GetHelp() == "" {
			t.Errorf("%s: %s has no HELP", name, n)
		}
	}
	return exposition{name, families}
}

// daemonExposition is the daemon's metrics file (metrics.textfile and
// run_dir/metrics.prom) with a series in every family.
func daemonExposition(t *testing.T) exposition {
	t.Helper()
	m := NewMetrics("1.2.3")
	m.Blocked.Inc("window")
	m.LockAcquire.Observe(0.2)
	m.LastCheck.Set(1.7e9)
	var b bytes.Buffer
	if _, err := m.Registry.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	e := parseExposition(t, "daemon", b.Bytes())
	for n, f := range e.families {
		if len(f.GetMetric()) == 0 {
			t.Errorf("daemon: the test gives %s no series; give it one", n)
		}
	}
	return e
}

// detectExposition is `crd-detect --format prom` (the textfile the man page's
// cron line writes) with two detectors, one of which fires.
func detectExposition(t *testing.T) exposition {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "run/reboot-required"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	args := []string{"--config", cfg, "--root", root, "--format", "prom",
		"--detector-file", "/run/reboot-required", "--detector-file", "/run/nothing"}
	_ = crddetect.Run(context.Background(), args, strings.NewReader(""), &out, io.Discard)
	return parseExposition(t, "crd-detect --format prom", out.Bytes())
}

// TestExpositionsShareOneTextfileDirectory applies node_exporter's textfile
// collector rule across every exposition the project writes: one name has
// one type, one HELP text and one set of label names, else the collector
// drops the family and sets node_textfile_scrape_error.
func TestExpositionsShareOneTextfileDirectory(t *testing.T) {
	type first struct {
		file   string
		family *dto.MetricFamily
		labels []string
	}
	seen := map[string]first{}
	for _, e := range []exposition{daemonExposition(t), detectExposition(t)} {
		for name, f := range e.families {
			labels := labelNames(f)
			prev, ok := seen[name]
			if !ok {
				seen[name] = first{e.name, f, labels}
				continue
			}
			if prev.family.GetType() != f.GetType() {
				t.Errorf("%s: type %v in %s, %v in %s", name, prev.family.GetType(), prev.file, f.GetType(), e.name)
			}
			if prev.family.GetHelp() != f.GetHelp() {
				t.Errorf("%s: inconsistent HELP: %q in %s, %q in %s", name, prev.family.GetHelp(), prev.file, f.GetHelp(), e.name)
			}
			if !slices.Equal(prev.labels, labels) {
				t.Errorf("%s: labels %v in %s, %v in %s", name, prev.labels, prev.file, labels, e.name)
			}
		}
	}
}

// labelNames is the sorted set of label names a family's series carry.
func labelNames(f *dto.MetricFamily) []string {
	var names []string
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() != "le" && !slices.Contains(names, l.GetName()) {
				names = append(names, l.GetName())
			}
		}
	}
	slices.Sort(names)
	return names
}
