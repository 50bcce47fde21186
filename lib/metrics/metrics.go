// Package metrics is a tiny, dependency-free Prometheus text exposition
// writer: counters and gauges with labels, and histograms with fixed
// buckets, collected in an explicit Registry and written with WriteTo or
// atomically into a .prom file (node_exporter's textfile collector, or the
// file `crd-lock step serve-metrics` serves).
//
// It exists because linking the Prometheus client library costs the daemon
// more resident memory than its idle budget allows (docs/performance.md,
// "Figures measured by hand"); the daemon needs only a handful of series.
package metrics

import (
	"bufio"
	"bytes"
	"fmt"
	"github.com/clusterrebootd/clusterrebootd/lib/atomicfile"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Registry holds metric families in registration order. It is safe for
// concurrent use.
type Registry struct {
	mu       sync.Mutex
	families []*family
	names    map[string]bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{names: map[string]bool{}} }

type kind string

const (
	kindCounter   kind = "counter"
	kindGauge     kind = "gauge"
	kindHistogram kind = "histogram"
)

type family struct {
	name, help string
	kind       kind
	labels     []string
	// series maps the joined label values to a value (counters, gauges).
	series map[string]*series
	// histogram state.
	buckets []float64
	counts  []uint64
	sum     float64
	count   uint64
}

type series struct {
	values []string
	value  float64
}

func (r *Registry) register(f *family) *family {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[f.name] {
		// Programming error caught by tests; return the family anyway.
		for _, old := range r.families {
			if old.name == f.name {
				return old
			}
		}
	}
	r.names[f.name] = true
	r.families = append(r.families, f)
	return f
}

// Counter is a monotonically increasing value per label set.
type Counter struct {
	r *Registry
	f *family
}

// Gauge is a value that goes up and down, per label set.
type Gauge struct {
	r *Registry
	f *family
}

// Histogram counts observations into fixed buckets (no labels).
type Histogram struct {
	r *Registry
	f *family
}

// NewCounter registers a counter with the given label names.
func (r *Registry) NewCounter(name, help string, labels ...string) *Counter {
	return &Counter{r, r.register(&family{name: name, help: help, kind: kindCounter, labels: labels, series: map[string]*series{}})}
}

// NewGauge registers a gauge with the given label names.
func (r *Registry) NewGauge(name, help string, labels ...string) *Gauge {
	return &Gauge{r, r.register(&family{name: name, help: help, kind: kindGauge, labels: labels, series: map[string]*series{}})}
}

// NewHistogram registers a histogram with the given upper bounds (sorted
// ascending; +Inf is implicit).
func (r *Registry) NewHistogram(name, help string, buckets []float64) *Histogram {
	b := append([]float64(nil), buckets...)
	sort.Float64s(b)
	return &Histogram{r, r.register(&family{name: name, help: help, kind: kindHistogram, buckets: b, counts: make([]uint64, len(b))})}
}

// get returns the series of values, creating it at 0. Missing values are
// empty strings; extra ones are ignored.
func (f *family) get(values []string) *series {
	v := make([]string, len(f.labels))
	copy(v, values)
	key := strings.Join(v, "\xff")
	s, ok := f.series[key]
	if !ok {
		s = &series{values: v}
		f.series[key] = s
	}
	return s
}

// Add adds delta (>= 0; negative deltas are ignored) to the series.
func (c *Counter) Add(delta float64, labelValues ...string) {
	if delta < 0 {
		return
	}
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.f.get(labelValues).value += delta
}

// Inc adds 1 to the series.
func (c *Counter) Inc(labelValues ...string) { c.Add(1, labelValues...) }

// Touch creates the series at 0 so that it is exposed before its first event.
func (c *Counter) Touch(labelValues ...string) { c.Add(0, labelValues...) }

// Value returns the series' value (for tests and status).
func (c *Counter) Value(labelValues ...string) float64 {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.f.get(labelValues).value
}

// Set sets the series.
func (g *Gauge) Set(v float64, labelValues ...string) {
	g.r.mu.Lock()
	defer g.r.mu.Unlock()
	g.f.get(labelValues).value = v
}

// Value returns the series' value.
func (g *Gauge) Value(labelValues ...string) float64 {
	g.r.mu.Lock()
	defer g.r.mu.Unlock()
	return g.f.get(labelValues).value
}

// Observe records one observation.
func (h *Histogram) Observe(v float64) {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	for i, b := range h.f.buckets {
		if v <= b {
			h.f.counts[i]++
		}
	}
	h.f.sum += v
	h.f.count++
}

// Count returns the number of observations.
func (h *Histogram) Count() uint64 {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	return h.f.count
}

// WriteTo writes every family in the Prometheus text format 0.0.4.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cw := &countWriter{w: bufio.NewWriter(w)}
	for _, f := range r.families {
		fmt.Fprintf(cw, "# HELP %s %s\n# TYPE %s %s\n", f.name, escapeHelp(f.help), f.name, f.kind)
		switch f.kind {
		case kindHistogram:
			for i, b := range f.buckets {
				fmt.Fprintf(cw, "%s_bucket{le=\"%s\"} %d\n", f.name, formatFloat(b), f.counts[i])
			}
			fmt.Fprintf(cw, "%s_bucket{le=\"+Inf\"} %d\n", f.name, f.count)
			fmt.Fprintf(cw, "%s_sum %s\n%s_count %d\n", f.name, formatFloat(f.sum), f.name, f.count)
		default:
			keys := make([]string, 0, len(f.series))
			for k := range f.series {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				s := f.series[k]
				fmt.Fprintf(cw, "%s%s %s\n", f.name, labelText(f.labels, s.values), formatFloat(s.value))
			}
		}
	}
	if err := cw.w.Flush(); err != nil && cw.err == nil {
		cw.err = err
	}
	return cw.n, cw.err
}

// WriteFile writes the exposition to path atomically (lib/atomicfile):
// scrapers never see a partial file.
func (r *Registry) WriteFile(path string) error {
	var b bytes.Buffer
	if _, err := r.WriteTo(&b); err != nil {
		return fmt.Errorf("metrics: render: %w", err)
	}
	if err := atomicfile.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

func labelText(names, values []string) string {
	if len(names) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteString(`="`)
		b.WriteString(escapeLabel(values[i]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}

func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}
