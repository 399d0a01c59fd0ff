package main

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/shard"
)

func TestShardsLines(t *testing.T) {
	figs := []figure{
		{name: shardsOne, unit: "msg/s", fila: 2000, nats: math.NaN()},
		{name: shardsTwo, unit: "msg/s", fila: 2400, nats: math.NaN()},
		{name: shardsFour, unit: "msg/s", fila: 3000, nats: math.NaN()},
	}
	want := []string{"SHARDS one=2000 two=2400 four=3000 ratio2=1.200 ratio4=1.500 unit=msg/s"}
	if got := shardsLines(figs); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := shardsLines(figs[1:]); got != nil {
		t.Fatalf("without the 1-shard figure: %q", got)
	}
	figs[2].fila = math.NaN()
	if got := shardsLines(figs); got != nil {
		t.Fatalf("with a figure n/a: %q", got)
	}
}

// Every shard gets its keys, and each key hashes to the shard it is listed under.
func TestShardKeysSpreadEvenly(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		keys := shardKeys(n, shardsKeysPer)
		plan := shard.Plan{Shards: uint32(n)}
		for s, ks := range keys {
			if len(ks) != shardsKeysPer {
				t.Fatalf("%d shards: shard %d has %d keys", n, s, len(ks))
			}
			for _, k := range ks {
				if got := plan.Of(&shard.Message{FairnessKey: k}); got != uint32(s) {
					t.Fatalf("%d shards: key %s listed under shard %d hashes to %d", n, k, s, got)
				}
			}
		}
	}
}

func TestFairLines(t *testing.T) {
	figs := fairFigures()
	for i, c := range []float64{333, 667, 1000, 1333, 1667} {
		figs[i].fila = c
	}
	figs[len(figs)-1].fila = 0.1
	got := fairLines(figs)
	if len(got) != 1 || !strings.HasPrefix(got[0], "FAIRNESS scope=shards shards=4 taken=5000 k0_weight=1 k0_shard=") ||
		!strings.Contains(got[0], " k4=1667 k4_want=1666.7 ") || !strings.HasSuffix(got[0], " max_deviation_pct=0.10 target=2 result=met") {
		t.Fatalf("got %q", got)
	}
	figs[len(figs)-1].fila = 25
	if got := fairLines(figs); len(got) != 1 || !strings.HasSuffix(got[0], "max_deviation_pct=25.00 target=2 result=missed") {
		t.Fatalf("got %q", got)
	}
	figs[len(figs)-1].fila = math.NaN()
	if got := fairLines(figs); got != nil {
		t.Fatalf("n/a: %q", got)
	}
}
