package main

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestScaleLinesSetTheClusterBesideTheSingleNode(t *testing.T) {
	figs := []figure{
		{name: "publish_1kb_fsync", unit: "msg/s", fila: 40000},
		{name: "cluster_publish_1kb_fsync", unit: "msg/s", fila: 10000},
		{name: "cluster_lifecycle_1kb_4c", unit: "msg/s", fila: 30000}, // no single-node figure in the run
		{name: "roundtrip_p50_1kb_fsync", unit: "us", fila: 800},
		{name: "cluster_roundtrip_p50_1kb_fsync", unit: "us", fila: 1600},
		{name: "cluster_failover_p50", unit: "ms", fila: math.NaN()},
	}
	want := []string{
		"SCALE figure=cluster_publish_1kb_fsync cluster=10000 single=40000 ratio=0.250 unit=msg/s target=0.5 result=missed",
		"SCALE figure=cluster_roundtrip_p50_1kb_fsync cluster=1600.0 single=800.0 ratio=2.000 unit=us",
	}
	if got := scaleLines(figs); !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestNATSClusterConfigRoutesToTheOthers(t *testing.T) {
	conf := natsClusterConfig(jsSyncAlways, "n2", "127.0.0.1:4222", []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, 1, "/d/n2")
	for _, s := range []string{`server_name: "n2"`, "sync_interval: always", `listen: "127.0.0.1:2"`, "nats-route://127.0.0.1:1", "nats-route://127.0.0.1:3"} {
		if !strings.Contains(conf, s) {
			t.Errorf("config lacks %q:\n%s", s, conf)
		}
	}
	if strings.Contains(conf, "nats-route://127.0.0.1:2") {
		t.Errorf("node routes to itself:\n%s", conf)
	}
}
