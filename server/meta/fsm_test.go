package meta

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/auth"
)

func refusedCode(err error) Code {
	var r *Refused
	if errors.As(err, &r) {
		return r.Code
	}
	return 0
}

// Two nodes race to create one name: both proposals are logged, in either order. Applying the log
// on any node lets exactly the first one win, and every node ends in the same state.
func TestCreateQueueRaceHasOneWinnerEverywhere(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		name := fmt.Sprintf("q%d", rng.IntN(5))
		a, b := queue(name), queue(name)
		a.MaxAttempts, b.MaxAttempts = 1, 2 // the two proposals differ
		log := []queuelog.Frame{CreateQueue(a, 3, 0), CreateQueue(b, 3, 0)}
		if rng.IntN(2) == 0 {
			log[0], log[1] = log[1], log[0]
		}
		nodes := []*FSM{New(Config{Self: "n1"}), New(Config{Self: "n2"})}
		var snaps [][]byte
		for _, f := range nodes {
			for _, n := range []string{"n1", "n2", "n3"} {
				if err := apply(t, f, PutNode(Node{ID: NodeID(n), Address: n + ":5555"})); err != nil {
					t.Fatal(err)
				}
			}
			first, second := apply(t, f, log[0]), apply(t, f, log[1])
			if first != nil || refusedCode(second) != CodeQueueExists {
				t.Fatalf("round %d: results %v, %v; want nil, queue_exists", round, first, second)
			}
			want := log[0].(*queuelog.CreateQueue)
			got, _ := f.Catalog().Queue(name)
			if !bytes.Equal(got.AppendTo(nil), want.Definition) {
				t.Fatalf("round %d: the second CreateQueue's definition won", round)
			}
			snaps = append(snaps, snapshotBytes(t, f))
		}
		if !bytes.Equal(snaps[0], snaps[1]) {
			t.Fatalf("round %d: the nodes' states differ", round)
		}
	}
}

func TestCreateQueueRefusals(t *testing.T) {
	f := New(Config{})
	if err := apply(t, f, CreateQueue(queue("a"), 0, 0)); err != nil {
		t.Fatal(err)
	}
	// A log written before CreateQueue may hold any name: "b.dlq" as a queue of its own.
	if err := apply(t, f, PutQueue(queue("b.dlq"))); err != nil {
		t.Fatal(err)
	}
	dlq := queue("c")
	dlq.DLQOf = "x"
	for _, c := range []struct {
		cmd  queuelog.Frame
		want Code
	}{
		{CreateQueue(queue("a"), 0, 0), CodeQueueExists},
		{CreateQueue(queue("b"), 0, 0), CodeQueueExists}, // its dead-letter queue's name is taken
		{CreateQueue(queue("x.dlq"), 0, 0), CodeReservedName},
		{CreateQueue(queue(""), 0, 0), CodeInvalidName},
		{CreateQueue(queue("a b"), 0, 0), CodeInvalidName},
		{CreateQueue(dlq, 0, 0), CodeInvalidDefinition},
		{&queuelog.CreateQueue{Definition: []byte{0, 9}}, CodeInvalidDefinition},
		{CreateQueue(queue("d"), 0, 2), CodeTooManyQueues}, // a and b.dlq
		{DeleteQueue("nope"), CodeQueueNotFound},
		{DeleteQueue("a.dlq"), CodeDeadLetterQueue},
		{UpdateQueue(queue("nope")), CodeQueueNotFound},
		{UpdateQueue(&store.QueueRecord{Name: "a", CreatedAt: 5}), CodeInvalidDefinition},
		{UpdateQueue(&store.QueueRecord{Name: "a.dlq", CreatedAt: 1000}), CodeInvalidDefinition},
		{PutNode(Node{}), CodeInvalidNode},
	} {
		before := snapshotBytes(t, f)
		err := apply(t, f, c.cmd)
		if got := refusedCode(err); got != c.want {
			t.Errorf("%v: refused %v (%v), want %v", c.cmd.Opcode(), got, err, c.want)
		}
		if !bytes.Equal(before, snapshotBytes(t, f)) {
			t.Errorf("%v refused as %v changed the state", c.cmd.Opcode(), c.want)
		}
	}
	if err := apply(t, f, CreateQueue(queue("d"), 0, 3)); err != nil {
		t.Errorf("the third queue under max_queues 3: %v", err)
	}
	var r *Refused
	if err := apply(t, f, CreateQueue(queue("a"), 0, 0)); !errors.As(err, &r) || r.Message != `queue "a" already exists` {
		t.Errorf("refusal %v, want the broker's message", err)
	}
}

func TestQueueLifecycleTellsTheReconciler(t *testing.T) {
	var ev events
	f := New(Config{Self: "n1", Reconciler: &ev})
	c := f.Catalog()
	if err := apply(t, f, CreateQueue(queue("a"), 0, 0)); err != nil {
		t.Fatal(err)
	}
	if got, want := ev.take(), []string{"assign a a.dlq [n1]"}; !slices.Equal(got, want) {
		t.Fatalf("create: %q, want %q", got, want)
	}
	if d, _ := c.Queue("a.dlq"); d.DLQOf != "a" || d.CreatedAt != 1000 {
		t.Errorf("dead-letter queue %+v", d)
	}
	up := queue("a")
	up.MaxAttempts = 9
	if err := apply(t, f, UpdateQueue(up)); err != nil {
		t.Fatal(err)
	}
	if a, _ := c.Assignment("a.dlq"); a.Queue.MaxAttempts != 9 {
		t.Errorf("updated to %d attempts", a.Queue.MaxAttempts)
	}
	if err := apply(t, f, &queuelog.SetConfig{Key: "k", Value: "v"}); err != nil {
		t.Fatal(err)
	}
	if err := apply(t, f, DeleteQueue("a")); err != nil {
		t.Fatal(err)
	}
	if got, want := ev.take(), []string{"assign a a.dlq [n1]", "config k=v", "drop a"}; !slices.Equal(got, want) {
		t.Fatalf("update, config, delete: %q, want %q", got, want)
	}
	if len(c.Queues()) != 0 || c.Groups() != 0 || len(c.Assignments()) != 0 {
		t.Fatalf("after delete: %v", c.Queues())
	}
	if err := apply(t, f, CreateQueue(queue("a"), 0, 0)); err != nil {
		t.Errorf("the name of a deleted queue: %v", err)
	}
}

// The commands of a log written before CreateQueue existed apply as they did: PutQueue stores a
// definition without checks, DropQueue deletes one, the config and keys change.
func TestOldCommandsStillApply(t *testing.T) {
	var ev events
	f := New(Config{Reconciler: &ev})
	c := f.Catalog()
	q := queue("a")
	dlq := store.QueueRecord{Name: "a.dlq", CreatedAt: q.CreatedAt, DLQOf: "a"}
	h := auth.HashOf("secret")
	steps := []struct {
		cmds []queuelog.Frame
		want []string
	}{
		{[]queuelog.Frame{PutQueue(q), PutQueue(&dlq)}, []string{"assign a a.dlq [local]"}},
		{[]queuelog.Frame{PutQueue(queue("b"))}, []string{"assign b b.dlq [local]"}}, // a dead-letter queue it never wrote
		{[]queuelog.Frame{&queuelog.SetConfig{Key: "k", Value: "v"}}, []string{"config k=v"}},
		{[]queuelog.Frame{&queuelog.PutAPIKey{ID: "key1", Name: "ci", SecretHash: h[:], CreatedAt: 7}}, nil},
		{[]queuelog.Frame{&queuelog.SetACL{ID: "key1", Permissions: []queuelog.ACLPermission{{Kind: "produce", Pattern: "a*"}}}}, nil},
		{[]queuelog.Frame{&queuelog.DropQueue{Name: "b"}, &queuelog.DropQueue{Name: "b.dlq"}}, []string{"drop b"}},
	}
	for i, s := range steps {
		if err := apply(t, f, s.cmds...); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := ev.take(); !slices.Equal(got, s.want) {
			t.Fatalf("step %d: heard %q, want %q", i, got, s.want)
		}
	}
	if got := c.Queues(); len(got) != 2 || got[0].Name != "a" || got[1].Name != "a.dlq" || got[0].MaxAttempts != 3 {
		t.Fatalf("queues %+v", got)
	}
	if v, _ := c.ConfigValue("k"); v != "v" {
		t.Errorf("config k = %q", v)
	}
	if r, ok := c.Keys().Get("key1"); !ok || r.Hash != h || len(r.ACL) != 1 || r.ACL[0].Pattern != "a*" {
		t.Errorf("key %+v", r)
	}
	if err := apply(t, f, &queuelog.RevokeAPIKey{ID: "key1"}); err != nil || c.Keys().Len() != 0 {
		t.Errorf("revoke: %v, %d keys", err, c.Keys().Len())
	}
	if err := apply(t, f, &queuelog.Enqueue{}); err == nil || refusedCode(err) != 0 {
		t.Errorf("a queue command: %v, want an error that is no refusal", err)
	}
	if err := apply(t, f, PutQueue(queue("c")), &queuelog.PutAPIKey{ID: "k", SecretHash: []byte{1}}, PutQueue(queue("d"))); err == nil {
		t.Error("a bad key: no error")
	}
	if _, ok := c.Queue("c"); !ok {
		t.Error("the command before the failed one was not applied")
	}
	if _, ok := c.Queue("d"); ok {
		t.Error("the command after the failed one was applied")
	}
}

func TestFirstMemberPlacesEveryGroup(t *testing.T) {
	var ev events
	f := New(Config{Self: "n1", Reconciler: &ev})
	c := f.Catalog()
	for _, cmd := range []queuelog.Frame{PutQueue(queue("old")), CreateQueue(queue("new"), 1, 0)} {
		if err := apply(t, f, cmd); err != nil {
			t.Fatal(err)
		}
	}
	ev.take()
	if err := apply(t, f, PutNode(Node{ID: "n1", Address: "a:1"})); err != nil {
		t.Fatal(err)
	}
	if got, want := ev.take(), []string{"assign new new.dlq [n1]", "assign old old.dlq [n1]"}; !slices.Equal(got, want) {
		t.Fatalf("heard %q, want %q", got, want)
	}
	for _, n := range []string{"n2", "n3"} {
		if err := apply(t, f, PutNode(Node{ID: NodeID(n), Address: n})); err != nil {
			t.Fatal(err)
		}
	}
	// Later members top up the group short of its replication (3), not the one created with 1.
	if got, want := ev.take(), []string{"assign old old.dlq [n1 n2]", "assign old old.dlq [n1 n2 n3]"}; !slices.Equal(got, want) {
		t.Errorf("later members: heard %q, want %q", got, want)
	}
	if a, _ := c.Assignment("old"); !slices.Equal(a.Joining, []NodeID{"n2", "n3"}) {
		t.Errorf("old joining %q, want n2 and n3", a.Joining)
	}
	if err := apply(t, f, CreateQueue(queue("third"), 0, 0), PutQueue(queue("legacy"))); err != nil {
		t.Fatal(err)
	}
	if got, want := ev.take(), []string{"assign third third.dlq [n2 n3 n1]", "assign legacy legacy.dlq [n3 n2 n1]"}; !slices.Equal(got, want) {
		t.Fatalf("heard %q, want %q", got, want)
	}
	if got := c.Nodes(); len(got) != 3 || got[0] != (Node{ID: "n1", Address: "a:1"}) {
		t.Errorf("nodes %+v", got)
	}
	var names []string
	for _, a := range c.AssignmentsFor("n2") {
		names = append(names, a.Name())
	}
	if want := []string{"legacy", "old", "third"}; !slices.Equal(names, want) {
		t.Errorf("n2 hosts %q, want %q", names, want)
	}
	if a, _ := c.Assignment("new"); a.Replication != 1 || a.PreferredLeader() != "n1" {
		t.Errorf("new: %+v", a)
	}
}
