package report

import (
	"fmt"
	"html"
	"html/template"
	"strings"
	"time"
)

// Chart geometry, in SVG user units; the page scales them to its width.
const (
	chartW, chartH = 640, 180
	padL, padB     = 56, 22
	padT, padR     = 10, 10
	barH           = 18
)

// series is one line of a line chart: times and values.
type series struct {
	Name  string
	Class string // line, total
	At    []time.Time
	V     []float64
}

// lineChart draws series over one time axis, from zero to the largest
// value, labelled with yLabel. Nothing but numbers and escaped text goes
// into the SVG.
func lineChart(title string, ss []series, yLabel func(float64) string) template.HTML {
	var t0, t1 time.Time
	vmax := 0.0
	n := 0
	for _, s := range ss {
		for i, at := range s.At {
			if n == 0 || at.Before(t0) {
				t0 = at
			}
			if n == 0 || at.After(t1) {
				t1 = at
			}
			vmax = max(vmax, s.V[i])
			n++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartW, chartH, html.EscapeString(title))
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, padL, chartH-padB, chartW-padR, chartH-padB)
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, padL, padT, padL, chartH-padB)
	if n < 2 {
		fmt.Fprintf(&b, `<text x="%d" y="%d">not enough samples</text></svg>`, padL+8, chartH/2)
		return template.HTML(b.String())
	}
	vmax = max(vmax, 1)
	span := t1.Sub(t0).Seconds()
	x := func(at time.Time) float64 {
		if span <= 0 {
			return padL
		}
		return padL + at.Sub(t0).Seconds()/span*float64(chartW-padL-padR)
	}
	y := func(v float64) float64 { return chartH - padB - v/vmax*float64(chartH-padB-padT) }
	for _, s := range ss {
		if len(s.At) == 0 {
			continue
		}
		pts := make([]string, len(s.At))
		for i := range s.At {
			pts[i] = fmt.Sprintf("%.1f,%.1f", x(s.At[i]), y(s.V[i]))
		}
		fmt.Fprintf(&b, `<polyline class="%s" data-series="%s" data-points="%d" points="%s"/>`,
			html.EscapeString(s.Class), html.EscapeString(s.Name), len(pts), strings.Join(pts, " "))
	}
	fmt.Fprintf(&b, `<text x="4" y="%d">%s</text>`, padT+10, html.EscapeString(yLabel(vmax)))
	fmt.Fprintf(&b, `<text x="4" y="%d">0</text>`, chartH-padB)
	fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`, padL, chartH-4, html.EscapeString(t0.UTC().Format("2006-01-02 15:04:05")))
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">+%s</text>`, chartW-padR, chartH-4, html.EscapeString(t1.Sub(t0).Round(time.Second).String()))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// barChart draws one horizontal bar per count, longest first as given.
func barChart(title string, cs []Count) template.HTML {
	if len(cs) == 0 {
		return template.HTML(`<p class="muted">none</p>`)
	}
	h := len(cs)*(barH+6) + 6
	var nmax int64 = 1
	for _, c := range cs {
		nmax = max(nmax, c.N)
	}
	const labelW, numW = 170, 70
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="bars" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartW, h, html.EscapeString(title))
	for i, c := range cs {
		top := 6 + i*(barH+6)
		w := float64(c.N) / float64(nmax) * float64(chartW-labelW-numW)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`, labelW-6, top+barH-5, html.EscapeString(c.Name))
		fmt.Fprintf(&b, `<rect class="bar" data-name="%s" data-n="%d" x="%d" y="%d" width="%.1f" height="%d"/>`,
			html.EscapeString(c.Name), c.N, labelW, top, max(w, 1), barH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%d</text>`, float64(labelW)+max(w, 1)+6, top+barH-5, c.N)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
