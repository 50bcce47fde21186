package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// row is one figure of the table: samples of this product and, where one
// exists, of a peer measured in the same run.
type row struct {
	Key     string
	Figure  string
	Unit    string
	Samples []float64
	Target  string
	// Pass tells whether the median meets the target (nil: no target).
	Pass        func(median float64) bool
	Peer        string
	PeerSamples []float64
	Note        string
}

// quantile is the nearest-rank quantile q (0..1) of xs (NaN when empty).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func median(xs []float64) float64 { return quantile(xs, 0.5) }
func p95(xs []float64) float64    { return quantile(xs, 0.95) }

// num formats a figure with a precision that suits its size.
func num(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "—"
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 0.1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func (r row) verdict() string {
	if r.Pass == nil {
		return ""
	}
	if len(r.Samples) == 0 {
		return "no data"
	}
	if r.Pass(median(r.Samples)) {
		return "met"
	}
	return "MISSED"
}

func (r row) peerText() string {
	if r.Peer == "" {
		return ""
	}
	return fmt.Sprintf("%s: %s (p95 %s, n=%d)", r.Peer, num(median(r.PeerSamples)), num(p95(r.PeerSamples)), len(r.PeerSamples))
}

// markdownTable renders rows as a Markdown table.
func markdownTable(rows []row) string {
	var b strings.Builder
	b.WriteString("| figure | median | p95 | n | target | | peer, same run |\n|---|---:|---:|---:|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s (%s) | %s | %s | %d | %s | %s | %s |\n", r.Figure, r.Unit, num(median(r.Samples)), num(p95(r.Samples)),
			len(r.Samples), r.Target, r.verdict(), r.peerText())
	}
	return b.String()
}

// textTable renders rows for the terminal.
func textTable(rows []row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-72s %9s %9s %4s  %-12s %-7s %s\n", "figure", "median", "p95", "n", "target", "", "peer (same run)")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-72s %9s %9s %4d  %-12s %-7s %s\n", r.Figure+" ("+r.Unit+")", num(median(r.Samples)), num(p95(r.Samples)),
			len(r.Samples), r.Target, r.verdict(), r.peerText())
	}
	return b.String()
}
