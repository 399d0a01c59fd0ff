package registry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/registry"
)

// host records what the registry asks of it; a replica's Open can be held to see that other
// groups go on meanwhile.
type host struct {
	mu     sync.Mutex
	events []string
	hold   map[string]chan struct{}
	fail   map[string]error
}

type replica struct {
	h    *host
	name string
}

func (r *replica) Update(a meta.Assignment) error {
	r.h.note(fmt.Sprintf("update %s vt=%d", r.name, a.Queue.VisibilityTimeoutMs))
	return nil
}
func (r *replica) Close(drop bool) { r.h.note(fmt.Sprintf("close %s drop=%v", r.name, drop)) }

func (h *host) note(e string) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

func (h *host) Open(a meta.Assignment) (*replica, error) {
	h.mu.Lock()
	hold, err := h.hold[a.Name()], h.fail[a.Name()]
	h.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if err != nil {
		return nil, err
	}
	h.note("open " + a.Name())
	return &replica{h: h, name: a.Name()}, nil
}

func (h *host) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.events...)
}

// catalog is the Source: the groups as the meta state holds them now.
type catalog struct {
	mu     sync.Mutex
	groups map[string]meta.Assignment
}

func (c *catalog) Assignment(q string) (meta.Assignment, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.groups[q]
	return a, ok
}

// assign changes a group as a meta apply would, and tells the registry.
func (c *catalog) assign(r *registry.Registry[*replica], a meta.Assignment) {
	c.mu.Lock()
	c.groups[a.Name()] = a
	c.mu.Unlock()
	r.Assign(a)
}

func (c *catalog) drop(r *registry.Registry[*replica], group string) {
	c.mu.Lock()
	delete(c.groups, group)
	c.mu.Unlock()
	r.Drop(group)
}

func newRegistry(h *host) (*registry.Registry[*replica], *catalog) {
	c := &catalog{groups: map[string]meta.Assignment{}}
	return registry.New[*replica]("n1", h, c, nil), c
}

func assignment(name string, vt uint64, replicas ...meta.NodeID) meta.Assignment {
	return meta.Assignment{
		Queue:      store.QueueRecord{Name: name, VisibilityTimeoutMs: vt},
		DeadLetter: store.QueueRecord{Name: meta.DeadLetterName(name), DLQOf: name},
		Replicas:   replicas,
	}
}

func await(t *testing.T, r *registry.Registry[*replica], group string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.Await(ctx, group)
}

// A group's changes are carried out in order, only for the groups this node replicates, and
// both of a group's names find its replica until it is dropped.

func TestReconcilesAssignmentsInOrder(t *testing.T) {
	h := &host{}
	r, c := newRegistry(h)
	r.Start(nil, nil)
	c.assign(r, assignment("q", 1, "n2", "n1"))
	c.assign(r, assignment("elsewhere", 1, "n2", "n3"))
	for _, g := range []string{"q", "elsewhere"} {
		if err := await(t, r, g); err != nil {
			t.Fatal(err)
		}
	}
	c.assign(r, assignment("q", 2, "n2", "n1"))
	if err := await(t, r, "q"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"q", "q.dlq"} {
		ref, ok := r.Lookup(name)
		if !ok || ref.Replica.name != "q" || ref.DeadLetter != (name == "q.dlq") {
			t.Fatalf("Lookup(%q) = %+v, %v", name, ref, ok)
		}
	}
	if _, ok := r.Lookup("elsewhere"); ok {
		t.Fatal("a group this node does not replicate has a local replica")
	}
	c.drop(r, "q")
	if err := await(t, r, "q"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup("q.dlq"); ok {
		t.Fatal("a dropped group's dead-letter queue is still found")
	}
	want := []string{"open q", "update q vt=2", "close q drop=true"}
	if got := h.seen(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("host saw %v, want %v", got, want)
	}
}

// A group slow to open holds up no other group, and a failed open is what Await returns.
func TestGroupsReconcileIndependently(t *testing.T) {
	h := &host{hold: map[string]chan struct{}{"slow": make(chan struct{})}, fail: map[string]error{"bad": errors.New("disk on fire")}}
	r, c := newRegistry(h)
	r.Start(nil, nil)
	c.assign(r, assignment("slow", 1, "n1"))
	c.assign(r, assignment("fast", 1, "n1"))
	c.assign(r, assignment("bad", 1, "n1"))
	if err := await(t, r, "fast"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup("fast"); !ok {
		t.Fatal("fast waited for slow")
	}
	if err := await(t, r, "bad"); err == nil {
		t.Fatal("a failed open is not reported")
	}
	close(h.hold["slow"])
	if err := await(t, r, "slow"); err != nil {
		t.Fatal(err)
	}
	if got := r.Names(); fmt.Sprint(got) != "[fast fast.dlq slow slow.dlq]" {
		t.Fatalf("Names() = %v", got)
	}
}

// A replay of old changes (a group created and deleted since) opens nothing: the registry
// reconciles with the current state, not with each change.
func TestReplayedChangesOfAGoneGroupOpenNothing(t *testing.T) {
	h := &host{}
	r, _ := newRegistry(h)
	r.Start(nil, nil)
	r.Assign(assignment("gone", 1, "n1")) // the catalog no longer has it
	r.Drop("gone")
	if err := await(t, r, "gone"); err != nil {
		t.Fatal(err)
	}
	if got := h.seen(); len(got) != 0 {
		t.Fatalf("the host was asked %v for a group that no longer exists", got)
	}
}

// Changes heard before Start are dropped (the replicas Start is given reflect them), and the
// replicas given to Start are published.
func TestStartPublishesWhatTheNodeOpened(t *testing.T) {
	h := &host{}
	r, c := newRegistry(h)
	c.assign(r, assignment("early", 1, "n1"))
	r.Start([]meta.Assignment{assignment("early", 1, "n1")}, []*replica{{h: h, name: "early"}})
	if err := await(t, r, "early"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup("early.dlq"); !ok {
		t.Fatal("a replica opened at start-up is not found")
	}
	if got := h.seen(); len(got) != 0 {
		t.Fatalf("the host was asked %v for a change heard before Start", got)
	}
	reps, err := r.Close()
	if err != nil || len(reps) != 1 {
		t.Fatalf("Close returned %v, %v", reps, err)
	}
	if _, err := r.Close(); !errors.Is(err, registry.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}
