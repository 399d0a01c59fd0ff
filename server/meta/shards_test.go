package meta

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/filamq/fila/generated/shard"
)

// A sharded queue's CreateQueue makes one group per shard, each with its dead-letter queue, their
// preferred leaders spread over the members; an update changes every shard; a delete drops
// every shard; a snapshot carries it all.
func TestShardedQueueIsOneGroupPerShard(t *testing.T) {
	var ev events
	f := New(Config{Self: "n1", Reconciler: &ev})
	for i := 1; i <= 3; i++ {
		id := NodeID(fmt.Sprint("n", i))
		if err := apply(t, f, PutNode(Node{ID: id, Address: string(id)})); err != nil {
			t.Fatal(err)
		}
	}
	def := queue("orders")
	def.Shards = 4
	if err := apply(t, f, CreateQueue(def, 0, 0)); err != nil {
		t.Fatal(err)
	}
	cat := f.Catalog()
	leads := map[NodeID]int{}
	for i := range uint32(4) {
		name := shard.Name("orders", i)
		a, ok := cat.Assignment(name)
		if !ok || a.DeadLetter.Name != name+".dlq" {
			t.Fatalf("shard %d: %+v %v", i, a, ok)
		}
		if i > 0 && (a.Queue.ShardOf != "orders" || a.Queue.ShardIndex != i || a.Queue.Shards != 0) {
			t.Fatalf("shard %d's record: %+v", i, a.Queue)
		}
		leads[a.PreferredLeader()]++
	}
	if q, _ := cat.Queue("orders"); q.Shards != 4 {
		t.Fatalf("the queue records %d shards", q.Shards)
	}
	if len(leads) != 3 {
		t.Fatalf("the shards' preferred leaders are %v: not spread over the 3 members", leads)
	}
	if got := ev.take(); len(got) != 4 { // one assignment per shard
		t.Fatalf("reconciler heard %v", got)
	}

	up := *def
	up.MaxAttempts = 9
	if err := apply(t, f, UpdateQueue(&up)); err != nil {
		t.Fatal(err)
	}
	for i := range uint32(4) {
		if q, _ := cat.Queue(shard.Name("orders", i)); q.MaxAttempts != 9 {
			t.Fatalf("shard %d not updated: %+v", i, q)
		}
	}
	up.Shards = 2
	var r *Refused
	if err := apply(t, f, UpdateQueue(&up)); !errors.As(err, &r) {
		t.Fatalf("an update changing the shard count: %v", err)
	}

	b := snapshotBytes(t, f)
	twin := New(Config{Self: "n2"})
	if err := restore(t, twin, b); err != nil {
		t.Fatal(err)
	}
	for i := range uint32(4) {
		a, _ := cat.Assignment(shard.Name("orders", i))
		c, ok := twin.Catalog().Assignment(shard.Name("orders", i))
		if !ok || !slices.Equal(a.Replicas, c.Replicas) || c.Queue.ShardIndex != a.Queue.ShardIndex {
			t.Fatalf("restored shard %d: %+v", i, c)
		}
	}
	if q, _ := twin.Catalog().Queue("orders"); q.Shards != 4 {
		t.Fatalf("restored: %d shards", q.Shards)
	}

	if err := apply(t, f, DeleteQueue("orders*2")); !errors.As(err, &r) {
		t.Fatalf("deleting a shard alone: %v", err)
	}
	if err := apply(t, f, DeleteQueue("orders")); err != nil {
		t.Fatal(err)
	}
	if n := len(cat.Queues()); n != 0 || cat.Groups() != 0 {
		t.Fatalf("%d definitions, %d groups left after the delete", n, cat.Groups())
	}
}

// Bad shard counts are refused; max_queues counts every shard.
func TestShardCountsRefused(t *testing.T) {
	f := New(Config{})
	var r *Refused
	def := queue("big")
	def.Shards = shard.Max + 1
	if err := apply(t, f, CreateQueue(def, 0, 0)); !errors.As(err, &r) {
		t.Fatalf("%d shards: %v", def.Shards, err)
	}
	def.Shards = 4
	if err := apply(t, f, CreateQueue(def, 0, 3)); !errors.As(err, &r) || r.Code != CodeTooManyQueues {
		t.Fatalf("4 shards under max_queues 3: %v", err)
	}
	if err := apply(t, f, CreateQueue(def, 0, 4)); err != nil {
		t.Fatal(err)
	}
	if f.Catalog().Groups() != 4 {
		t.Fatalf("%d groups", f.Catalog().Groups())
	}
}
