package engine

import (
	"errors"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"pgregory.net/rapid"

	"github.com/filamq/fila/server/offheap"
)

// testAlloc is the Allocator of the queues a test makes with newTestQueue or newSim: the Go heap
// (nil), or useScratch's for the test that calls it.
var testAlloc Allocator

// The Allocator satisfies the engine's interface.
var _ Allocator = (*offheap.Allocator)(nil)

// offHeap returns an Allocator without a scratch directory for the test (buffers of 256 KiB or
// more are anonymous memory), closed at its end.
func offHeap(t testing.TB) *offheap.Allocator {
	t.Helper()
	a := offheap.New(offheap.Options{})
	t.Cleanup(func() { a.Close() })
	return a
}

// benchAlloc is the Allocator of the benchmarks' queues: fila-server's without a scratch
// directory, so that they measure the memory a server's queues use.
var benchAlloc = sync.OnceValue(func() Allocator { return offheap.New(offheap.Options{}) })

// useScratch gives the queues the test makes (testAlloc) an Allocator with a scratch directory in
// t.TempDir(), and returns it; with small set, every buffer of 1 KiB or more is mapped (so short
// test queues use scratch regions too).
func useScratch(t testing.TB, small bool) *offheap.Allocator {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("scratch regions are made on Linux only")
	}
	o := offheap.Options{}
	if small {
		o.MinSize = 1 << 10
	}
	a := offheap.New(o)
	t.Cleanup(func() { a.Close() })
	err := a.OpenScratch(filepath.Join(t.TempDir(), "scratch"), 0)
	if errors.Is(err, offheap.ErrNoReserve) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	old := testAlloc
	testAlloc = a
	t.Cleanup(func() { testAlloc = old })
	return a
}

// bytesOf returns the memory of s as bytes.
func bytesOf[T any](s []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), cap(s)*int(unsafe.Sizeof(*new(T))))
}

// The twin comparison with every buffer of 1 KiB or more a scratch region and sweeps drawn
// between the commands.
func TestDispatchMatchesNaiveTwinSwept(t *testing.T) {
	a := useScratch(t, true)
	var swept int64
	checkTwin(t, map[string]func(*rapid.T){"sweep": func(*rapid.T) { swept += a.Sweep() }})
	if swept == 0 {
		t.Fatal("no sweep met a scratch region")
	}
}

// The random operations' properties, likewise swept between commands.
func TestPropertyRandomOperationsSwept(t *testing.T) {
	a := useScratch(t, true)
	var swept int64
	rapid.Check(t, func(t *rapid.T) {
		s := newSim(t)
		actions := s.actions()
		actions["sweep"] = func(*rapid.T) { swept += a.Sweep() }
		for range 5 {
			t.Repeat(actions)
		}
		s.checkReplay(t)
	})
	if swept == 0 {
		t.Fatal("no sweep met a scratch region")
	}
}

// fillChunks enqueues four half chunks of messages into q: record chunks past the first, and
// the ordered index's, come from its Allocator.
func fillChunks(t *testing.T, q *Queue) {
	t.Helper()
	for b := range uint64(4) {
		msgs := make([]Message, chunkSize/2)
		for i := range msgs {
			msgs[i] = msg(b*chunkSize/2+uint64(i)+1, "k", 1)
		}
		enqueue(t, q, 1, msgs...)
	}
}

// Release gives a Queue's scratch regions and anonymous memory back at once, while sweeps run
// beside it, and a second Release does nothing.
func TestReleaseGivesMemoryBack(t *testing.T) {
	a := useScratch(t, false)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				a.Sweep()
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	q := newTestQueue(t, DefaultConfig())
	fillChunks(t, q)
	if st := a.Stats(); st.Scratch == 0 || st.Mapped == 0 {
		t.Fatalf("a queue of %d messages holds %+v", q.Len(), st)
	}
	q.Release()
	if st := a.Stats(); st.Mapped != 0 || st.Scratch != 0 {
		t.Fatalf("a released queue still holds %+v", st)
	}
	q.Release()
	runtime.KeepAlive(q)
}

// A Queue nobody holds any more and nobody released (a dropped Restorer's, say) gives its
// scratch regions back once collected, also while sweeps run beside it.
func TestDroppedQueueGivesRegionsBack(t *testing.T) {
	a := useScratch(t, false)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				a.Sweep()
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	func() {
		q := newTestQueue(t, DefaultConfig())
		fillChunks(t, q)
		if a.Stats().Scratch == 0 {
			t.Fatalf("a queue of %d messages has no scratch region", q.Len())
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for st := a.Stats(); st.Scratch > 0 || st.Mapped > 0; st = a.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("%+v still held after the queue was collected", st)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}
