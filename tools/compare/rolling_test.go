package main

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestRollingLinesSetTheRestartBesideTheQuietCluster(t *testing.T) {
	figs := rollingFigures()
	for i, v := range []float64{20000, 15000, 16.2, 40.1, 12.34} {
		figs[i].fila, figs[i].nats = v, math.NaN()
	}
	want := []string{"ROLLING quiet=20000 during=15000 ratio=0.750 p99_quiet_ms=16.2 p99_during_ms=40.1 restart_s=12.3"}
	if got := rollingLines(figs); !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := summaryLines(figs); !slices.Equal(got, want) {
		t.Fatalf("summaryLines: got %q, want %q", got, want)
	}
	if got := rollingLines(figs[1:]); got != nil {
		t.Fatalf("without the quiet figure: %v", got)
	}
}
