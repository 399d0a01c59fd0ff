package main

import (
	"math"
	"testing"
)

func TestHintsLinesSetTheSDKsPublishBesideTheDirectOne(t *testing.T) {
	figs := []figure{
		{name: "cluster_publish_1kb_fsync", unit: "msg/s", fila: 40000, nats: 20000},
		{name: "cluster_sdk_publish_1kb_fsync", unit: "msg/s", fila: 39000, nats: 18000},
	}
	got := hintsLines(figs)
	want := "HINTS broker=fila sdk=39000 direct=40000 ratio=0.975 unit=msg/s target=0.95 result=met"
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %q, want %q", got, want)
	}
	figs[1].fila = 30000
	if got := hintsLines(figs); len(got) != 1 || got[0][len(got[0])-6:] != "missed" {
		t.Errorf("a slow SDK: %q", got)
	}
	figs[1].fila = math.NaN()
	if got := hintsLines(figs); got != nil {
		t.Errorf("not measured: %q", got)
	}
}
