package meta

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"testing"
)

// throttleEvents records the owners a ThrottleWatcher heard.
type throttleEvents struct {
	events
	owners []string
}

func (e *throttleEvents) ThrottleOwnerSet(name string, o ThrottleOwner) {
	e.owners = append(e.owners, fmt.Sprintf("%s=%s/%d@%d", name, o.Node, o.Epoch, o.Since))
}

func owner(t *testing.T, f *FSM, name string) string {
	t.Helper()
	o, ok := f.Catalog().ThrottleOwner(name)
	if !ok {
		return "none"
	}
	return fmt.Sprintf("%s/%d@%d", o.Node, o.Epoch, o.Since)
}

// TestAThrottleHasOneOwnerDecidedInApply: the first claim of an unowned throttle wins, a claim
// racing it is ignored, a claim replacing the owner's epoch takes over with the next epoch (a
// stale one is ignored), a removed member's throttles are left without an owner for the next
// claim, and claims naming no throttle or an unknown node are refused.
func TestAThrottleHasOneOwnerDecidedInApply(t *testing.T) {
	var ev throttleEvents
	f := New(Config{Self: "n1", Reconciler: &ev})
	for _, n := range []NodeID{"n1", "n2", "n3"} {
		if err := apply(t, f, PutNode(Node{ID: n, Address: string(n) + ":1"})); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		remove   NodeID // a RemoveMember of it, or else a claim:
		node     NodeID
		replaces uint64
		at       int64
		code     Code // refused with it; 0: applied
		want     string
	}{
		{node: "n2", at: 100, want: "n2/1@100"},
		{node: "n3", at: 101, want: "n2/1@100"},              // a racing first claim: ignored
		{node: "n1", replaces: 1, at: 200, want: "n1/2@200"}, // replaces the owner of epoch 1
		{node: "n3", replaces: 1, at: 201, want: "n1/2@200"}, // stale: epoch 1 is gone
		{remove: "n1", want: "/2@200"},                       // its owner removed: no owner, epoch kept
		{node: "n3", at: 300, want: "n3/3@300"},
		{node: "n9", replaces: 3, at: 400, code: CodeNodeNotFound, want: "n3/3@300"},
		{node: "", replaces: 3, at: 400, code: CodeInvalidNode, want: "n3/3@300"},
	}
	for i, s := range steps {
		var err error
		if s.remove != "" {
			err = apply(t, f, RemoveMember(s.remove, true))
		} else {
			err = apply(t, f, ClaimThrottle("orders", s.node, s.replaces, s.at))
		}
		var r *Refused
		switch {
		case s.code == 0 && err != nil:
			t.Fatalf("step %d: %v", i, err)
		case s.code != 0 && (!errors.As(err, &r) || r.Code != s.code):
			t.Fatalf("step %d: %v, want code %v", i, err, s.code)
		}
		if got := owner(t, f, "orders"); got != s.want {
			t.Fatalf("after step %d: owner %s, want %s", i, got, s.want)
		}
	}
	want := []string{"orders=n2/1@100", "orders=n1/2@200", "orders=/2@200", "orders=n3/3@300"}
	if fmt.Sprint(ev.owners) != fmt.Sprint(want) {
		t.Fatalf("the watcher heard %v, want %v", ev.owners, want)
	}
	if got := owner(t, f, "other"); got != "none" {
		t.Fatalf("an unclaimed throttle has owner %s", got)
	}
}

// TestAThrottleClaimOnASingleNodeNeedsNoMember: a node that knows no members takes claims by
// its own ID.
func TestAThrottleClaimOnASingleNodeNeedsNoMember(t *testing.T) {
	f := New(Config{})
	if err := apply(t, f, ClaimThrottle("t", "local", 0, 5)); err != nil {
		t.Fatal(err)
	}
	if got := owner(t, f, "t"); got != "local/1@5" {
		t.Fatalf("owner %s", got)
	}
}

// TestSnapshotCarriesThrottleOwners: the owners (one without an owner) survive a snapshot and a
// Restore byte for byte, and a state without owners snapshots as it did before they existed.
func TestSnapshotCarriesThrottleOwners(t *testing.T) {
	f := New(Config{Self: "n1"})
	full(t, f)
	before := snapshotBytes(t, f)
	if bytes.Contains(before, []byte("orders")) {
		t.Fatal("the fixture already names the throttle")
	}
	for _, c := range []struct {
		name     string
		node     NodeID
		replaces uint64
	}{{"orders", "n1", 0}, {"billing", "n2", 0}, {"orders", "n2", 1}} {
		if err := apply(t, f, ClaimThrottle(c.name, c.node, c.replaces, 77)); err != nil {
			t.Fatal(err)
		}
	}
	if err := apply(t, f, SetDraining("n2", true), RemoveMember("n2", false)); err != nil {
		t.Fatal(err)
	}
	if err := apply(t, f, ClaimThrottle("orders", "n1", 0, 88)); err != nil {
		t.Fatal(err)
	}
	snap := snapshotBytes(t, f)
	g := New(Config{Self: "n3"})
	if err := restore(t, g, snap); err != nil {
		t.Fatal(err)
	}
	if again := snapshotBytes(t, g); !bytes.Equal(snap, again) {
		t.Fatal("the restored state snapshots differently")
	}
	want := map[string]ThrottleOwner{"orders": {Node: "n1", Epoch: 3, Since: 88}, "billing": {Epoch: 1, Since: 77}}
	if got := g.Catalog().ThrottleOwners(); !maps.Equal(got, want) {
		t.Fatalf("restored owners %v, want %v", got, want)
	}
	// A restore replaces the owners: a snapshot without any leaves none.
	if err := restore(t, g, before); err != nil {
		t.Fatal(err)
	}
	if got := g.Catalog().ThrottleOwners(); len(got) != 0 {
		t.Fatalf("after restoring a snapshot without owners: %v", got)
	}
}
