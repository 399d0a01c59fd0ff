package storage

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// walWritesFail makes every write and sync of a WAL fail with EIO while on is set.
func walWritesFail(on *atomic.Bool) errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !on.Load() || !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			return syscall.EIO
		}
		return nil
	})
}

// Commits already inside Write when the WAL starts failing go on into Pebble. The first fails
// its sync; one spanning a block leaves the WAL writer's error set; the next then panics inside
// Pebble's commit pipeline (db.go commitWrite), which leaves the pipeline's mutex
// locked: every later commit blocks for good, and so would Pebble's Close. The store must say it
// is stuck (only a new process can open the directory again), keep refusing writes at once and
// serving reads, never try to close or reopen the wedged database, and let Close return.
func TestCommitPanicInsidePebbleLeavesTheStoreStuckNotHung(t *testing.T) {
	var fail atomic.Bool
	db, err := Open(t.TempDir(), Options{fs: errorfs.Wrap(vfs.Default, walWritesFail(&fail)), RecoverInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(func(p *pebble.DB) error { return p.Set([]byte("before"), []byte("v"), pebble.Sync) }); err != nil {
		t.Fatal(err)
	}
	const writers = 8 // which one panics depends on timing (the fourth, once, in a race step)
	gates := make([]chan struct{}, writers)
	errs := make([]chan error, writers)
	inside := make(chan struct{}, writers)
	for i := range writers {
		gates[i], errs[i] = make(chan struct{}), make(chan error, 1)
		go func() {
			errs[i] <- db.Write(func(p *pebble.DB) error {
				inside <- struct{}{}
				<-gates[i]
				return p.Set([]byte{'w', byte(i)}, make([]byte, 40<<10), pebble.Sync)
			})
		}()
	}
	for range writers {
		<-inside // every writer is past the store's refusal check
	}
	fail.Store(true)
	// One at a time: each fails, until one has panicked inside the pipeline (usually the second
	// or the third: the first leaves the WAL error for the one after it to pick up, or picks it
	// up itself); every writer released after that blocks inside Pebble for good, holding the
	// store's read lock.
	released := 0
	for ; released < writers && !db.Health().Stuck; released++ {
		close(gates[released])
		if err := <-errs[released]; err == nil {
			t.Fatalf("writer %d: a commit whose WAL write failed succeeded", released)
		}
	}
	if !db.Health().Stuck {
		t.Fatalf("no commit of %d panicked inside Pebble's commit pipeline", writers)
	}
	for ; released < writers; released++ {
		close(gates[released])
	}

	h := db.Health()
	if !h.Stuck || !errors.Is(h.Err, ErrWritesFailing) {
		t.Fatalf("health after a commit panicked inside Pebble: %+v, want stuck and refusing writes", h)
	}
	fail.Store(false) // the disk takes writes again: the store must still not reopen
	if err := db.Write(func(p *pebble.DB) error { return p.Set([]byte("after"), nil, pebble.Sync) }); !errors.Is(err, ErrWritesFailing) {
		t.Fatalf("a write to a stuck store: %v, want it refused at once", err)
	}
	if err := db.Read(func(p *pebble.DB) error {
		v, closer, err := p.Get([]byte("before"))
		if err == nil {
			defer closer.Close()
			if string(v) != "v" {
				return errors.New("read " + string(v))
			}
		}
		return err
	}); err != nil {
		t.Fatalf("a read of a stuck store: %v", err)
	}
	if err := db.Close(); err == nil || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("Close of a stuck store: %v, want an error asking for a restart", err)
	}
}
