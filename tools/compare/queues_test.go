package main

import (
	"math"
	"testing"
)

func TestQueuesLinesSetAThousandQueuesBesideTen(t *testing.T) {
	figs := []figure{
		{name: queuesName(10), unit: "msg/s", fila: 40000, nats: math.NaN()},
		{name: queuesName(1000), unit: "msg/s", fila: 30000, nats: math.NaN()},
	}
	got := queuesLines(figs)
	want := "QUEUES broker=fila q1000=30000 q10=40000 ratio=0.750 unit=msg/s target=0.70 result=met"
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %q, want %q", got, want)
	}
	figs[1].fila = 20000
	if got := queuesLines(figs); len(got) != 1 || got[0][len(got[0])-6:] != "missed" {
		t.Errorf("a slow thousand: %q", got)
	}
	figs[0].fila = math.NaN()
	if got := queuesLines(figs); got != nil {
		t.Errorf("not measured: %q", got)
	}
}
