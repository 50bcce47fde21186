package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// series is one line of a plot.
type series struct {
	name  string
	color string
	x, y  []float64
	// steps draws a step line (an empirical distribution).
	steps bool
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 || math.IsNaN(v) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// lineSVG draws series on linear axes from 0 with a legend. It needs no
// plotting library: the figures of docs/performance.md are plain SVG.
func lineSVG(title, xLabel, yLabel string, ss []series, yMax float64) string {
	const w, h, left, right, top, bottom = 640.0, 360.0, 60.0, 20.0, 40.0, 50.0
	xMax := 0.0
	for _, s := range ss {
		for _, v := range s.x {
			xMax = math.Max(xMax, v)
		}
		if yMax == 0 {
			for _, v := range s.y {
				yMax = math.Max(yMax, v)
			}
		}
	}
	xMax, yMax = niceMax(xMax), niceMax(yMax*1.05)
	px := func(x float64) float64 { return left + x/xMax*(w-left-right) }
	py := func(y float64) float64 { return h - bottom - y/yMax*(h-top-bottom) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	for i := 0; i <= 5; i++ {
		xv, yv := xMax*float64(i)/5, yMax*float64(i)/5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", px(0), py(yv), px(xMax), py(yv))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, py(yv)+4, num(yv))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(xv), h-bottom+16, num(xv))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", px(0), py(0), px(xMax), py(0))
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", px(0), py(0), px(0), py(yMax))
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (left+w-right)/2, h-12, html.EscapeString(xLabel))
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (top+h-bottom)/2, html.EscapeString(yLabel))
	for i, s := range ss {
		var pts []string
		for j := range s.x {
			if s.steps && j > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.x[j]), py(s.y[j-1])))
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.x[j]), py(math.Min(s.y[j], yMax))))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", s.color, strings.Join(pts, " "))
		ly := top + 8 + float64(i)*16
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", w-right-230, ly, w-right-210, ly, s.color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", w-right-204, ly+4, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// ecdf is the empirical distribution of xs: sorted values and the share
// of samples at or below each.
func ecdf(name, color string, xs []float64) series {
	s := slices.Clone(xs)
	slices.Sort(s)
	out := series{name: name, color: color, steps: true}
	for i, v := range s {
		out.x = append(out.x, v)
		out.y = append(out.y, float64(i+1)/float64(len(s))*100)
	}
	return out
}
