package main

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestForwardLinesSetTheForwardedPublishBesideTheDirectOne(t *testing.T) {
	figs := []figure{
		{name: "cluster_publish_1kb_fsync", unit: "msg/s", fila: 40000, nats: 20000},
		{name: "cluster_forward_publish_1kb_fsync", unit: "msg/s", fila: 24000, nats: math.NaN()},
	}
	want := []string{"FORWARD broker=fila forwarded=24000 direct=40000 ratio=0.600 unit=msg/s target=0.7 result=missed"}
	if got := forwardLines(figs); !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := forwardLines(figs[1:]); got != nil {
		t.Fatalf("without the direct figure: %v", got)
	}
}
