package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

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
	names := []string{"fsync_append_1kb", "quic_echo_rtt_1kb", "tls_echo_rtt_1kb", "quic_stream_1kb", "tls_stream_1kb"}
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
