package main

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestDurabilityLinesSetFastBesideCommitted(t *testing.T) {
	figs := []figure{
		{name: durabilityCommitted, unit: "msg/s", fila: 9000, nats: math.NaN()},
		{name: durabilityFast, unit: "msg/s", fila: 12000, nats: math.NaN()},
	}
	want := []string{"DURABILITY committed=9000 fast=12000 ratio=1.333 unit=msg/s"}
	if got := durabilityLines(figs); !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := durabilityLines(figs[1:]); got != nil {
		t.Fatalf("without the committed figure: %v", got)
	}
	figs[1].fila = math.NaN()
	if got := durabilityLines(figs); got != nil {
		t.Fatalf("with the fast figure n/a: %v", got)
	}
}
