package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// backlogPoint is one BACKLOG summary line.
type backlogPoint struct {
	messages float64
	rssMiB   float64
	perMsg   float64
}

// backlogSeries is the BACKLOG lines of one run, under a label.
type backlogSeries struct {
	label  string
	points []backlogPoint
}

// plotBacklog writes an SVG of the BACKLOG lines of runs given as label=file (the tool's standard
// output saved to a file): RSS and bytes per message against the backlog's size, one line per run.
func plotBacklog(out string, runs []string) error {
	var series []backlogSeries
	for _, run := range runs {
		label, path, ok := strings.Cut(run, "=")
		if !ok {
			return fmt.Errorf("-plot-backlog: %q is not label=file", run)
		}
		pts, err := readBacklog(path)
		if err != nil {
			return err
		}
		series = append(series, backlogSeries{label, pts})
	}
	var b strings.Builder
	const w, h = 900, 340
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	panel(&b, series, 0, "RSS (MiB) against stored messages", rssTarget, func(p backlogPoint) float64 { return p.rssMiB })
	panel(&b, series, w/2, "RSS per stored message (bytes) against stored messages", 0, func(p backlogPoint) float64 { return p.perMsg })
	b.WriteString("</svg>\n")
	return os.WriteFile(out, []byte(b.String()), 0o644)
}

// rssTarget is issue 15's bound for a backlog of 10 M messages of 1 KB, drawn on the RSS panel.
const rssTarget = 600

var plotColors = []string{"#9a9a9a", "#2a6fdb", "#d9822b", "#3a9b3a"}

// panel draws one chart, 450 × 340 at x0: a log-scale x axis of messages, a linear y axis from 0.
// A target above 0 is drawn as a dashed line.
func panel(b *strings.Builder, series []backlogSeries, x0 int, title string, target float64, y func(backlogPoint) float64) {
	const left, right, top, bottom = 60, 20, 30, 60 // margins inside the panel
	const pw, ph = 450 - left - right, 340 - top - bottom
	minX, maxX, maxY := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range series {
		for _, p := range s.points {
			minX, maxX, maxY = math.Min(minX, p.messages), math.Max(maxX, p.messages), math.Max(maxY, y(p))
		}
	}
	if maxY == 0 || minX >= maxX {
		minX, maxX = minX/10, maxX*10
	}
	maxY = math.Max(maxY, target) * 1.1
	lx0, lx1 := math.Log10(minX)-0.25, math.Log10(maxX)+0.25
	px := func(v float64) float64 { return float64(x0+left) + (math.Log10(v)-lx0)/(lx1-lx0)*pw }
	py := func(v float64) float64 { return float64(top) + ph - v/maxY*ph }
	fmt.Fprintf(b, `<text x="%d" y="18" font-weight="bold">%s</text>`+"\n", x0+left, title)
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>`+"\n", x0+left, top, pw, ph)
	for i := 0; i <= 4; i++ {
		v := maxY * float64(i) / 4
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n", x0+left-4, py(v)+4, v)
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0+left, x0+left+pw, py(v), py(v))
	}
	if target > 0 {
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#c0392b" stroke-dasharray="6,4"/>`+"\n", x0+left, x0+left+pw, py(target), py(target))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" fill="#c0392b">target for 10 M × 1 KB: %.0f</text>`+"\n", x0+left+4, py(target)-4, target)
	}
	for _, s := range series[:min(1, len(series))] {
		for _, p := range s.points {
			fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(p.messages), top+ph+16, humanCount(p.messages))
		}
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">stored messages (log scale)</text>`+"\n", x0+left+pw/2, top+ph+32)
	for i, s := range series {
		c := plotColors[i%len(plotColors)]
		var pts []string
		for _, p := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.messages), py(y(p))))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(p.messages), py(y(p)), c)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s">%.0f</text>`+"\n", px(p.messages)+5, py(y(p))-5, c, y(p))
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), c)
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="%s">■ %s</text>`+"\n", x0+left+140*i, top+ph+50, c, s.label)
	}
}

func humanCount(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + " M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + " k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// readBacklog reads the BACKLOG lines of a saved run; messages are rounded to the size asked for
// (a lifecycle run leaves a few more or fewer).
func readBacklog(path string) ([]backlogPoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var pts []backlogPoint
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "BACKLOG ")
		if !ok {
			continue
		}
		kv := map[string]float64{}
		for _, field := range strings.Fields(rest) {
			k, v, _ := strings.Cut(field, "=")
			kv[k], _ = strconv.ParseFloat(v, 64)
		}
		n := kv["messages"]
		if n > 0 {
			mag := math.Pow(10, math.Floor(math.Log10(n)))
			n = math.Round(n/mag) * mag
		}
		pts = append(pts, backlogPoint{messages: n, rssMiB: kv["rss_mib"], perMsg: kv["bytes_per_msg"]})
	}
	if len(pts) == 0 {
		return nil, fmt.Errorf("%s: no BACKLOG line", path)
	}
	return pts, sc.Err()
}
