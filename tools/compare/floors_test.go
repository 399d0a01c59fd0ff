package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain runs the test binary as the relay process when the relay floor starts it.
func TestMain(m *testing.M) {
	relayIfChild()
	os.Exit(m.Run())
}

func TestFloorsAreMeasured(t *testing.T) {
	dir := t.TempDir()
	c, err := makeCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{tmp: dir, certs: c}
	floors, err := e.measureFloors(context.Background(), 20, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"fsync_append_1kb", fsyncPairFloor, "quic_echo_rtt_1kb", "tls_echo_rtt_1kb", "quic_stream_1kb", "quic_stream_1kb_cpu",
		"quic_relay_1kb", "quic_relay_1kb_cpu", "tls_stream_1kb"}
	if len(floors) != len(names) {
		t.Fatalf("%d floors, want %d", len(floors), len(names))
	}
	for i, f := range floors {
		if f.name != names[i] || f.p50 <= 0 || (f.unit == "us" && f.p99 < f.p50) {
			t.Errorf("floor %d: %+v", i, f)
		}
		if line := f.line(); !strings.HasPrefix(line, "FLOOR name="+f.name+" ") || !strings.HasSuffix(line, " unit="+f.unit) {
			t.Errorf("summary line %q", line)
		}
	}
	if table := floorsTable(floors); strings.Count(table, "\n") != 2+len(floors) {
		t.Errorf("table:\n%s", table)
	}
}

func TestGapLinesCompareTheFigureWithItsFloor(t *testing.T) {
	figs := []figure{{name: "roundtrip_p50_1kb_fsync", unit: "us", fila: 900}}
	floors := []floor{{name: fsyncPairFloor, unit: "us", p50: 500, p99: 700}}
	got := gapLines(figs, floors)
	want := "GAP figure=roundtrip_p50_1kb_fsync floor=fsync2_append_1kb fila=900.0 floor_p50=500.0 gap=400.0 limit=300 unit=us result=missed"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	figs[0].fila = 750
	if got := gapLines(figs, floors); len(got) != 1 || !strings.HasSuffix(got[0], " gap=250.0 limit=300 unit=us result=met") {
		t.Fatalf("got %q", got)
	}
	if got := gapLines(figs[:0], floors); len(got) != 0 {
		t.Fatalf("without the figure: %q", got)
	}
}

func TestCPUTimesAreRead(t *testing.T) {
	for start := selfCPU(); selfCPU()-start < 30*time.Millisecond; { // spend some CPU
	}
	if got := procCPU(os.Getpid()); got <= 0 || got > selfCPU()+time.Second {
		t.Errorf("procCPU of this process = %v, its rusage says %v", got, selfCPU())
	}
	if got := procCPU(-1); got != 0 {
		t.Errorf("procCPU of no process = %v", got)
	}
}

func TestCPULineNamesTheSide(t *testing.T) {
	got := (&cpuUse{broker: 4.8, tool: 4.75}).line("rift_pubsub_1kb", "fila")
	want := "CPU workload=rift_pubsub_1kb broker=fila broker_us=4.80 tool_us=4.75 unit=us/msg"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	got = (&cpuUse{broker: 10.9, tool: 2.1, nodes: []float64{5.1, 2.9, 2.9}}).line("cluster_publish_1kb_fsync", "fila")
	want = "CPU workload=cluster_publish_1kb_fsync broker=fila broker_us=10.90 tool_us=2.10 unit=us/msg nodes_us=5.10/2.90/2.90"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
