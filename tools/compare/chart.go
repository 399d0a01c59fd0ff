package main

import (
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	filaColor = color.RGBA{R: 0x2a, G: 0x6f, B: 0xdb, A: 0xff}
	natsColor = color.RGBA{R: 0x9a, G: 0x9a, B: 0x9a, A: 0xff}
)

// writeChart draws the figures as grouped bars, throughput on top and latency below, into a PNG.
func writeChart(path string, figs []figure) error {
	var thr, lat []figure
	for _, f := range figs {
		if f.better == higherBetter {
			thr = append(thr, f)
		} else {
			lat = append(lat, f)
		}
	}
	var rows [][]*plot.Plot
	if len(thr) > 0 {
		p, err := barPlot("Throughput (higher is better)", "thousand msg/s", thr, 1e-3)
		if err != nil {
			return err
		}
		rows = append(rows, []*plot.Plot{p})
	}
	if len(lat) > 0 {
		p, err := barPlot("Latency (lower is better)", "µs", lat, 1)
		if err != nil {
			return err
		}
		rows = append(rows, []*plot.Plot{p})
	}
	if len(rows) == 0 {
		return nil
	}
	w, h := 11*vg.Inch, vg.Length(len(rows))*4.5*vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(6), PadY: vg.Points(12)}
	canvases := plot.Align(rows, tiles, dc)
	for i, row := range rows {
		row[0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// barPlot is one panel: a Fila bar and a NATS bar per figure, values multiplied by scale.
// Values that could not be measured are drawn as no bar.
func barPlot(title, unit string, figs []figure, scale float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = unit
	names := make([]string, len(figs))
	filaVals, natsVals := make(plotter.Values, len(figs)), make(plotter.Values, len(figs))
	for i, f := range figs {
		names[i] = f.name
		filaVals[i], natsVals[i] = orZero(f.fila)*scale, orZero(f.nats)*scale
	}
	width := vg.Points(14)
	for i, s := range []struct {
		label string
		vals  plotter.Values
		c     color.Color
	}{{"fila", filaVals, filaColor}, {"nats", natsVals, natsColor}} {
		bars, err := plotter.NewBarChart(s.vals, width)
		if err != nil {
			return nil, err
		}
		bars.Color, bars.LineStyle.Width = s.c, 0
		bars.Offset = width * vg.Length(2*i-1) / 2
		p.Add(bars)
		p.Legend.Add(s.label, bars)
	}
	if err := addNA(p, figs); err != nil {
		return nil, err
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(figs))-0.4
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.15 // room for the legend above the tallest bar
	p.X.Tick.Label.Rotation = math.Pi / 8
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	p.Add(plotter.NewGrid())
	return p, nil
}

// addNA writes "fila n/a" or "nats n/a" above a category whose value could not be measured.
func addNA(p *plot.Plot, figs []figure) error {
	var xys plotter.XYs
	var labels []string
	for i, f := range figs {
		switch {
		case math.IsNaN(f.fila) && math.IsNaN(f.nats):
			labels = append(labels, "n/a")
		case math.IsNaN(f.fila):
			labels = append(labels, "fila n/a")
		case math.IsNaN(f.nats):
			labels = append(labels, "nats n/a")
		default:
			continue
		}
		xys = append(xys, plotter.XY{X: float64(i)})
	}
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = draw.XCenter, draw.YBottom
	}
	l.Offset.Y = vg.Points(4) // just above the axis line
	p.Add(l)
	return nil
}

func orZero(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}
