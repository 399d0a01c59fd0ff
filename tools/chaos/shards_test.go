package chaos

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/tools/internal/loopback"
)

// Three fila-server processes founded as a cluster, one queue of 4 shards ordered by group, and
// 15 s of kill -9 of shards' leaders (and SIGSTOP of a node now and then) under load, producers
// repeating half of their batches with the same idempotency keys: nothing acknowledged is lost,
// each group's messages are first delivered in the order they were enqueued, and no key makes
// two messages. FILA_CHAOS_SEED=N draws other faults.
//
// FILA_CHAOS_SHARDS=long runs it for 60 s. Its longer runs found four faults (three of the
// broker, one of the SDK), fixed since (docs/chaos.md, "What the sharded runs found").
func TestShardedQueueFaultsKeepOrderAndDedup(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three fila-server processes for 15 s")
	}
	load := 15 * time.Second
	if os.Getenv("FILA_CHAOS_SHARDS") == "long" {
		load = time.Minute
	}
	seed := uint64(7)
	if s := os.Getenv("FILA_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("FILA_CHAOS_SEED: %v", err)
		}
	}
	flags, err := FoundingFlags(3)
	if err != nil {
		t.Fatal(err)
	}
	httpAddrs := make([]string, 3)
	for i := range httpAddrs {
		if httpAddrs[i], err = loopback.FreeAddr(); err != nil {
			t.Fatal(err)
		}
	}
	c := startClusterWith(t, 3, func(id int) []string { return append(flags(id), "--http-listen", httpAddrs[id-1]) })
	const queue, shards = "orders", 4
	kill := KillShardLeader{Cluster: c, Queue: queue}
	res, err := Run(context.Background(), Config{
		Cluster: c, Nemesis: Mix{kill, kill, Pause{Cluster: c}}, Seed: seed,
		Duration: load, FaultEvery: 2 * time.Second, FaultHold: 2 * time.Second,
		Load: ShardedWorkload{Addrs: c.Addrs(), HTTPAddrs: httpAddrs, Queue: queue, Shards: shards, Rate: 800},
	})
	r := res.Report
	kinds, perShard, firsts := map[string]int{}, make([]int, shards), map[string]int{}
	var faults []string
	stopped := 0 // ClusterConsumers that gave up without closing: subscribed again
	for _, op := range res.History {
		switch {
		case op.Kind == Fault:
			kinds[strings.Fields(op.Value)[0]]++
			faults = append(faults, op.Value)
		case op.Kind == Enqueue && op.Outcome == Ok && op.ID != "":
			if id, err := fila.ParseMessageID(op.ID); err == nil {
				perShard[shard.IndexOf(id, shards)]++
			}
		case op.Kind == Deliver:
			firsts[op.Value]++
		case op.Kind == Subscribe && strings.Contains(op.Err, errStoppedOpen.Error()):
			stopped++
		}
	}
	t.Logf("seed %d: %v; faults %q; enqueues answered Ok per shard %v; ClusterConsumers stopped without closing %d",
		seed, r.Figures, faults, perShard, stopped)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("the history broke the queue's promises:\n%s", violationsShort(r, 20))
	}
	if kinds["kill"] == 0 || r.Enqueued == 0 || r.Repeats == 0 || !r.Drained || len(firsts) < 2 {
		t.Fatalf("the run did too little to tell: %v, faults %v", r.Figures, kinds)
	}
	for i, n := range perShard {
		if n == 0 {
			t.Fatalf("shard %d got no message: %v", i, perShard)
		}
	}
	// The same history with a group's message first delivered before its predecessor, and with
	// a repeat answered with another ID, fails by the rules.
	for _, m := range []struct {
		rule   string
		mutate func([]Op) ([]Op, string, bool)
	}{{RuleOrder, reorder}, {RuleDuplicate, repeatOtherID}} {
		h, value, ok := m.mutate(append([]Op(nil), res.History...))
		if !ok {
			t.Fatalf("no operation of the run to mutate for %s", m.rule)
		}
		if !namedBy(Check(h), m.rule, value) {
			t.Fatalf("the run's history mutated for %s passed", m.rule)
		}
	}
}

// namedBy reports whether r has a violation of rule naming value.
func namedBy(r Report, rule, value string) bool {
	for _, v := range r.Violations {
		if v.Rule == rule && v.Op.Value == value {
			return true
		}
	}
	return false
}

// A queue the admin HTTP API refuses (400) is not asked for again; an existing one (409) is fine.
func TestShardedQueueCreation(t *testing.T) {
	var asked atomic.Int32
	status := http.StatusBadRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/queues" {
			t.Errorf("%s %s", r.Method, r.URL.Path)
		}
		w.WriteHeader(status)
		io.WriteString(w, `{"error": "shards: 65 is more than 64"}`)
	}))
	defer srv.Close()
	w := ShardedWorkload{HTTPAddrs: []string{strings.TrimPrefix(srv.URL, "http://")}, Shards: 65}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := w.CreateQueues(ctx, time.Second)
	if err == nil || !strings.Contains(err.Error(), "more than 64") || asked.Load() != 1 {
		t.Fatalf("a refused creation: %v, asked %d times", err, asked.Load())
	}
	status = http.StatusConflict
	if err := w.CreateQueues(ctx, time.Second); err != nil {
		t.Fatalf("an existing queue: %v", err)
	}
	if err := (ShardedWorkload{}).CreateQueues(ctx, time.Second); err == nil {
		t.Fatal("no HTTP address: no error")
	}
}
