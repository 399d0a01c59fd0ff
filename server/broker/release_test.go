package broker

import (
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/server/offheap"
)

// With Options.Allocator, a queue's records come from it, and the broker gives them back when it
// drops the queue's state: when the queue hibernates, and when it is deleted. The collector is
// off, so that no queue gives anything back by being collected.
func TestDroppedQueuesReleaseTheirMemory(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	alloc := offheap.New(offheap.Options{MinSize: 1 << 10}) // a short queue's chunks too
	defer alloc.Close()
	s := newScript(t)
	b, err := Open(Options{Store: s.mem, Sync: true, Clock: s.clock, NewTimer: s.newTimer, IdleTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Allocator: alloc})
	if err != nil {
		t.Fatal(err)
	}
	s.b = b
	defer b.Close()
	fill := func(when string) {
		t.Helper()
		line := "enqueue q" + strings.Repeat(" m", 100)
		if out := s.do(line); strings.Contains(out, "err") {
			t.Fatalf("%s: %s", when, out)
		}
		if alloc.Stats().Mapped == 0 {
			t.Fatalf("%s: 100 queued messages hold nothing from the allocator", when)
		}
	}
	if out := s.do("create q"); strings.Contains(out, "err") {
		t.Fatal(out)
	}
	fill("created")
	s.settled()
	s.idleUntilAsleep(t, b)
	if st := alloc.Stats(); st.Mapped != 0 {
		t.Fatalf("the hibernated queue still holds %d bytes from the allocator", st.Mapped)
	}
	fill("woken") // the queue wakes, replays its backlog and takes more
	if e := b.DeleteQueue("q"); e != nil {
		t.Fatal(e)
	}
	s.settled()
	if st := alloc.Stats(); st.Mapped != 0 {
		t.Fatalf("the deleted queue still holds %d bytes from the allocator", st.Mapped)
	}
}
