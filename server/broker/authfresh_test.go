package broker

import (
	"testing"
	"time"
)

// fakeMeta is the meta group as authFreshness sees it: whether it can confirm, and when.
type fakeMeta struct {
	ok    bool
	at    time.Time
	asked int
}

func (f *fakeMeta) confirm(time.Time) (time.Time, bool) { f.asked++; return f.at, f.ok }

func TestAuthFreshnessFollowsTheMetaGroupsConfirmations(t *testing.T) {
	now := time.Unix(1000, 0)
	m := &fakeMeta{}
	a := &authFreshness{bound: 4 * time.Second, confirm: m.confirm, now: func() time.Time { return now }}

	if a.fresh() {
		t.Fatal("fresh before any confirmation (a node that has not heard from the meta leader since its start)")
	}
	m.ok, m.at = true, now.Add(-100*time.Millisecond)
	if !a.fresh() {
		t.Fatal("stale right after a confirmation")
	}

	// Within half the bound the meta group is not asked again.
	asked := m.asked
	now = now.Add(time.Second)
	if !a.fresh() || m.asked != asked {
		t.Fatalf("1 s after: fresh %v, asked %d times more", a.fresh(), m.asked-asked)
	}

	// Past half the bound it is; a follower that still hears the leader stays fresh.
	now = now.Add(2 * time.Second)
	m.at = now.Add(-50 * time.Millisecond)
	if !a.fresh() || m.asked == asked {
		t.Fatalf("past half the bound: fresh %v, asked %d times more", a.fresh(), m.asked-asked)
	}

	// Cut off: no later confirmation. Fresh until the bound has passed since the last one, then
	// stale (a later answer whose contact is older changes nothing).
	m.ok = false
	last := m.at
	now = last.Add(4 * time.Second)
	if !a.fresh() {
		t.Fatal("stale at the bound")
	}
	now = last.Add(4*time.Second + time.Millisecond)
	if a.fresh() {
		t.Fatal("fresh past the bound without a confirmation")
	}
	m.ok, m.at = true, last.Add(-time.Second)
	if a.fresh() {
		t.Fatal("an older confirmation made it fresh again")
	}

	// Healed: the next confirmation counts at once.
	m.at = now
	if !a.fresh() {
		t.Fatal("stale after a new confirmation")
	}
}

// A single node's key store has no freshness test: it is never stale.
func TestASingleNodeIsNeverStale(t *testing.T) {
	o := DefaultOptions(t.TempDir())
	o.Sync = false
	o.BootstrapAPIKey = "bootstrap-secret-of-at-least-32-characters"
	b, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if st := b.Auth(); st.MayGoStale() || !st.Fresh() {
		t.Fatalf("a single node's key store: may go stale %v, fresh %v", st.MayGoStale(), st.Fresh())
	}
}
