package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// better says which direction of a figure is the good one.
type better int

const (
	higherBetter better = iota // throughput
	lowerBetter                // latency
)

// figure is one measured quantity on both brokers. A value that could not be measured is NaN and
// prints as n/a.
type figure struct {
	name   string // COMPARE workload=…
	unit   string // msg/s or us
	better better
	peer   string  // what the NATS side is, for the table
	target float64 // the ratio issue 5 asks for: at least this (throughput), at most (latency)
	fila   float64
	nats   float64
}

// ratio is fila/nats whatever the direction: ≥ 1 wins for throughput, ≤ 1 wins for latency.
func (f figure) ratio() float64 { return ratio(f.fila, f.nats) }

func ratio(fila, nats float64) float64 {
	if math.IsNaN(fila) || math.IsNaN(nats) || nats == 0 {
		return math.NaN()
	}
	return fila / nats
}

// verdict is "win", "loss" or "n/a" from Fila's side.
func (f figure) verdict() string {
	r := f.ratio()
	switch {
	case math.IsNaN(r):
		return "n/a"
	case f.better == higherBetter && r >= 1, f.better == lowerBetter && r <= 1:
		return "win"
	default:
		return "loss"
	}
}

// targetResult says whether the ratio meets the target, e.g. "≥ 2.0: missed".
func (f figure) targetResult() string {
	op, r := "≥", f.ratio()
	met := r >= f.target
	if f.better == lowerBetter {
		op, met = "≤", r <= f.target
	}
	res := "missed"
	switch {
	case math.IsNaN(r):
		res = "n/a"
	case met:
		res = "met"
	}
	return fmt.Sprintf("%s %.1f: %s", op, f.target, res)
}

// compareLine is the machine-readable summary line of a figure.
func (f figure) compareLine() string {
	return fmt.Sprintf("COMPARE workload=%s fila=%s nats=%s ratio=%s unit=%s",
		f.name, plain(f.fila, f.unit), plain(f.nats, f.unit), plainRatio(f.ratio()), f.unit)
}

// plain formats a value without grouping: whole messages per second, tenths of a microsecond.
func plain(v float64, unit string) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	prec := 0
	if unit == "us" {
		prec = 1
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func plainRatio(r float64) string {
	if math.IsNaN(r) {
		return "n/a"
	}
	return strconv.FormatFloat(r, 'f', 3, 64)
}

// grouped formats a value for people: 123,456 msg/s or 1,234.5 µs.
func grouped(v float64, unit string) string {
	s := plain(v, unit)
	if s == "n/a" {
		return s
	}
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := b.String()
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// markdownTable renders the figures as a Markdown table with the direction that wins.
func markdownTable(figs []figure) string {
	var b strings.Builder
	b.WriteString("| workload | NATS side | unit | better | fila | nats | ratio fila/nats | vs NATS | target |\n")
	b.WriteString("| --- | --- | --- | --- | ---: | ---: | ---: | --- | --- |\n")
	for _, f := range figs {
		dir, unit := "higher", f.unit
		if f.better == lowerBetter {
			dir = "lower"
		}
		if unit == "us" {
			unit = "µs"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f.name, f.peer, unit, dir,
			grouped(f.fila, f.unit), grouped(f.nats, f.unit), plainRatio(f.ratio()), f.verdict(), f.targetResult())
	}
	return b.String()
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of samples, which it sorts.
// It returns 0 for no samples.
func percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	rank := int(math.Ceil(p / 100 * float64(len(samples))))
	return samples[min(max(rank, 1), len(samples))-1]
}

// micros converts a duration to microseconds as a float.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
