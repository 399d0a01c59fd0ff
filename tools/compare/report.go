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
	// With -repeat, every run's value; fila and nats are then their medians.
	filaRuns, natsRuns []float64
}

// medians merges repeated runs of one workload (the same figures in the same order) into figures
// holding the median of each side, and every run's value for the table.
func medians(runs [][]figure) []figure {
	out := make([]figure, len(runs[0]))
	copy(out, runs[0])
	if len(runs) == 1 {
		return out
	}
	for i := range out {
		out[i].filaRuns, out[i].natsRuns = nil, nil
		for _, r := range runs {
			out[i].filaRuns = append(out[i].filaRuns, r[i].fila)
			out[i].natsRuns = append(out[i].natsRuns, r[i].nats)
		}
		out[i].fila, out[i].nats = median(out[i].filaRuns), median(out[i].natsRuns)
	}
	return out
}

// median of values (NaN when any is NaN: a side that could not be measured stays n/a).
func median(values []float64) float64 {
	v := slices.Clone(values)
	for _, x := range v {
		if math.IsNaN(x) {
			return math.NaN()
		}
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// cell renders a side's value, with the range of the runs when there were several.
func cell(v float64, runs []float64, unit string) string {
	if len(runs) < 2 || math.IsNaN(v) {
		return grouped(v, unit)
	}
	return fmt.Sprintf("%s (%s–%s)", grouped(v, unit), grouped(slices.Min(runs), unit), grouped(slices.Max(runs), unit))
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
	switch unit {
	case "us":
		prec = 1
	case cpuUnit, fairDevUnit:
		prec = 2
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
			cell(f.fila, f.filaRuns, f.unit), cell(f.nats, f.natsRuns, f.unit), plainRatio(f.ratio()), f.verdict(), f.targetResult())
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

// summaryLines are the machine-readable lines that set figures of the run against each other
// (SCALE, FORWARD, DURABILITY, HINTS, QUEUES, ROLLING, THROTTLE, SHARDS, FAIRNESS), each present
// when its figures were measured: printed after the floors and written to compare.txt.
func summaryLines(figs []figure) []string {
	var out []string
	for _, lines := range [](func([]figure) []string){scaleLines, forwardLines, durabilityLines, hintsLines, queuesLines, rollingLines, throttleLines, shardsLines, fairLines} {
		out = append(out, lines(figs)...)
	}
	return out
}
