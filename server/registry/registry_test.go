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

func (r *replica) Update(a meta.Assignment) {
	r.h.note(fmt.Sprintf("update %s vt=%d", r.name, a.Queue.VisibilityTimeoutMs))
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
	r := registry.New[*replica]("n1", h, nil)
	r.Start(nil, nil)
	r.Assign(assignment("q", 1, "n2", "n1"))
	r.Assign(assignment("elsewhere", 1, "n2", "n3"))
	r.Assign(assignment("q", 2, "n2", "n1"))
	for _, g := range []string{"q", "elsewhere"} {
		if err := await(t, r, g); err != nil {
			t.Fatal(err)
		}
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
	r.Drop("q")
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
	r := registry.New[*replica]("n1", h, nil)
	r.Start(nil, nil)
	r.Assign(assignment("slow", 1, "n1"))
	r.Assign(assignment("fast", 1, "n1"))
	r.Assign(assignment("bad", 1, "n1"))
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

// Changes heard before Start are dropped (the replicas Start is given reflect them), and the
// replicas given to Start are published.
func TestStartPublishesWhatTheNodeOpened(t *testing.T) {
	h := &host{}
	r := registry.New[*replica]("n1", h, nil)
	r.Assign(assignment("early", 1, "n1"))
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
