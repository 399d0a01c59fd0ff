package powerfail

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/tools/faultfs"
)

const (
	queueName         = "powerfail"
	visibilityTimeout = 500 * time.Millisecond
	defaultRounds     = 5
	// noFsyncMaxRounds bounds the search for a loss with --fsync=false.
	noFsyncMaxRounds = 10
	// startCrashEvery: every so many rounds the plug is pulled a second time, during the restart.
	startCrashEvery = 3
)

// TestPowerFailure: with fsync on, nothing the server acknowledged may be lost or undone.
func TestPowerFailure(t *testing.T) {
	rounds := defaultRounds
	if s := os.Getenv("FILA_POWERFAIL_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FILA_POWERFAIL_ROUNDS=%q is not a positive integer", s)
		}
		rounds = n
	}
	r := newRun(t, true)
	for round := 1; round <= rounds; round++ {
		r.round(round)
		if vs := r.l.found(); len(vs) > 0 {
			r.report(vs)
			t.FailNow()
		}
	}
}

// TestKillOnDisk: the same rounds with SIGKILL alone on an ordinary file system (t.TempDir), where
// the engine's scratch files are memory-mapped (faultfs does not support mmap, so the server falls
// back to anonymous memory there) and the WAL is zero-filled ahead for real.
// FILA_POWERFAIL_ROUNDS sets the rounds here too.
func TestKillOnDisk(t *testing.T) {
	rounds := defaultRounds
	if s := os.Getenv("FILA_POWERFAIL_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FILA_POWERFAIL_ROUNDS=%q is not a positive integer", s)
		}
		rounds = n
	}
	r := startRun(t, true, nil, t.TempDir())
	for round := 1; round <= rounds; round++ {
		r.round(round)
		if vs := r.l.found(); len(vs) > 0 {
			r.report(vs)
			t.FailNow()
		}
	}
}

// TestPowerFailureWithoutFsync proves the checker can fail: with --fsync=false the server
// acknowledges before its data is durable, so some power failure must lose acknowledged
// messages.
func TestPowerFailureWithoutFsync(t *testing.T) {
	// Without fsync the server may lose data to SIGKILL alone (Pebble holds unsynced WAL writes in
	// its own memory), so the test goes on until a plug pull has also dropped unsynced bytes in
	// faultfs, so that Drop is exercised too.
	r := newRun(t, false)
	lost := false
	for round := 1; round <= noFsyncMaxRounds; round++ {
		r.round(round)
		kinds := map[string]int{}
		for _, v := range r.l.found() {
			kinds[v.kind]++
		}
		lost = lost || kinds["lost"] > 0
		dropped := r.fs.Stats().DroppedBytes
		if lost && dropped > 0 {
			t.Logf("by round %d the checker reported %v, as it must without fsync (the plug pulls dropped %d unsynced bytes)",
				round, kinds, dropped)
			return
		}
	}
	if lost {
		t.Fatalf("faultfs dropped nothing in %d plug pulls: the losses came from SIGKILL alone and Drop went untested", noFsyncMaxRounds)
	}
	t.Fatalf("%d power failures with --fsync=false lost no acknowledged message: the checker cannot fail", noFsyncMaxRounds)
}

// run is one power-failure scenario: a server on a faultfs mount, restarted after every plug
// pull, and the ledger of what it acknowledged.
type run struct {
	t     *testing.T
	bin   string
	fsync bool
	fs    *faultfs.FS
	dir   string
	srv   *server
	prev  *server // the instance that crashed last, for its log
	l     *ledger
}

// newRun mounts a faultfs, starts the server on it and creates the queue. Everything is torn
// down when the test ends.
func newRun(t *testing.T, fsync bool) *run {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("the power-failure test needs FUSE and this machine has no /dev/fuse: %v", err)
	}
	tmp := t.TempDir()
	backing, mnt := filepath.Join(tmp, "backing"), filepath.Join(tmp, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fsys, err := faultfs.Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fsys.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return startRun(t, fsync, fsys, mnt)
}

// startRun starts the server on dir (on the faultfs fsys, or an ordinary file system when fsys
// is nil) and creates the queue.
func startRun(t *testing.T, fsync bool, fsys *faultfs.FS, dir string) *run {
	r := &run{t: t, bin: serverBinary(t), fsync: fsync, fs: fsys, dir: dir, l: newLedger()}
	r.start()
	t.Cleanup(func() { r.srv.stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := fila.Dial(ctx, r.srv.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := createQueue(ctx, c); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *run) start() {
	srv, err := startServer(r.bin, r.dir, r.fsync)
	if err != nil {
		r.t.Fatal(err)
	}
	r.srv = srv
}

// round puts the server under load, pulls the plug at a random moment, restarts it and checks
// what it stored against what it acknowledged.
func (r *run) round(round int) {
	var counts loadCounts
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { produce(ctx, r.srv.addr, round, "single", 1, r.l, &counts.single) })
	wg.Go(func() { produce(ctx, r.srv.addr, round, "batch", 16, r.l, &counts.batched) })
	wg.Go(func() { consume(ctx, r.srv.addr, round, r.l, &counts) })
	crashAt := time.Duration(30+rand.IntN(370)) * time.Millisecond
	time.Sleep(crashAt)

	r.srv.kill()
	cancel()
	wg.Wait()
	before := r.drop()
	after := r.stats()

	r.prev = r.srv
	startCrash := ""
	if round%startCrashEvery == 0 {
		// A second plug pull inside the restart: a start cut anywhere in its Pebble open (WAL
		// replay, flush, new WAL, deletion of the old) must leave a directory the next start takes.
		after := time.Duration(rand.IntN(300)) * time.Millisecond
		if err := crashDuringStart(r.bin, r.dir, r.fsync, after); err != nil {
			r.t.Fatalf("round %d: %v", round, err)
		}
		r.drop()
		startCrash = fmt.Sprintf(" (and again %v into the restart)", after)
	}
	restartAt := time.Now()
	r.start()
	checkAt := time.Now()
	stored, err := check(r.srv.addr, round, r.l)
	if err != nil {
		r.t.Fatalf("round %d: the check after the restart failed: %v\nlog of the restarted server:\n%s", round, err, r.srv.logs.tail(40))
	}
	r.t.Logf("round %d: plug pulled %v in%s: enqueues answered Ok %d single + %d batched, %d delivered, %d acks answered Ok; "+
		"dropped %d unsynced bytes in %d files (%d bytes synced so far); restarted in %v; %d stored, drained and acked in %v",
		round, crashAt, startCrash, counts.single.Load(), counts.batched.Load(), counts.delivered.Load(), counts.acked.Load(),
		after.DroppedBytes-before.DroppedBytes, after.DroppedFiles-before.DroppedFiles, after.SyncedBytes,
		checkAt.Sub(restartAt).Round(time.Millisecond), stored, time.Since(checkAt).Round(time.Millisecond))
}

// drop discards what the faultfs holds unsynced (the power cut after a SIGKILL) and returns its
// counters from before; on an ordinary file system it does nothing.
func (r *run) drop() faultfs.Stats {
	if r.fs == nil {
		return faultfs.Stats{}
	}
	st := r.fs.Stats()
	r.fs.Drop()
	return st
}

// stats is the faultfs's counters (zero on an ordinary file system).
func (r *run) stats() faultfs.Stats {
	if r.fs == nil {
		return faultfs.Stats{}
	}
	return r.fs.Stats()
}

// report fails the test with the violations and the logs of the servers around the last one.
func (r *run) report(vs []violation) {
	kinds := map[string]int{}
	var lines []string
	for i, v := range vs {
		kinds[v.kind]++
		if i < 20 {
			lines = append(lines, "  "+v.String())
		}
	}
	r.t.Errorf("%d violations %v:\n%s", len(vs), kinds, strings.Join(lines, "\n"))
	r.t.Logf("log of the server that crashed:\n%s", r.prev.logs.tail(40))
	r.t.Logf("log of the restarted server:\n%s", r.srv.logs.tail(40))
}
