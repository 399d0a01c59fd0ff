package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Every use of Pebble goes through Read or Write, which keep three promises.
//
//   - No panic escapes. Pebble panics when a commit follows a WAL write that failed (db.go
//     commitWrite, rotateWAL) and calls Logger.Fatalf when a synced commit fails (DB.Apply);
//     the logger here turns that Fatalf into a panic on the committing goroutine, and Write
//     recovers both into errors.
//   - A failed write stops writes. Pebble's WAL keeps its first error for good: every later
//     commit of that database fails or panics. So the first failure (a commit's error, a
//     recovered panic, a background error or a Fatalf) makes the store refuse every write with
//     a *WriteError without calling Pebble, while reads go on.
//   - Writes resume by themselves. While refusing, recoverLoop probes the directory with a real
//     write and fsync; once one succeeds it closes the failed database and opens it again
//     (replaying its WAL), and the store accepts writes.
//
// One failure cannot be recovered in the process. Commits that were already inside Write when the
// WAL failed go on into Pebble; once one has left the WAL writer's error set (a commit that
// fills a block does), the next panics inside Pebble's commit pipeline (db.go commitWrite, under
// commitPipeline.mu, with its batch queued but never applied), and the pipeline stays locked:
// every later commit blocks for good, and so does Pebble's Close, which takes the same mutex; a
// new Pebble in this process would need the directory lock the wedged one holds, and would race
// its background flushes and compactions. So a panic that unwound through the commit pipeline
// makes the store stuck (Health.Stuck): it refuses writes for good, serves reads, never closes or
// reopens that database, and its Close returns at once; the server exits on it so that its
// supervisor restarts it, and the new process replays the WAL (every acknowledged commit was
// synced to it). TestCommitPanicInsidePebbleLeavesTheStoreStuckNotHung builds the race.

// recoverInterval is how often a store refusing writes probes its directory (Options.RecoverInterval).
const recoverInterval = time.Second

// reopenWait bounds how long a reopen waits for the uses of the failed database to finish.
const reopenWait = 10 * time.Second

// probeBytes is the size of the file a probe writes: enough that a disk with only a few blocks
// free does not pass for writable.
const probeBytes = 1 << 20

// errClosed is what a use of a closed store returns.
var errClosed = errors.New("storage: closed")

// errStuck is what Close and a reopen of a stuck store return.
var errStuck = errors.New("storage: Pebble's commit pipeline is locked after a failed commit; restart the server")

// fatalPanic carries a Pebble Fatalf on a committing goroutine up to Write's recover.
type fatalPanic struct{ msg string }

// Read runs fn with the open database. fn must not keep the database, nor iterators, after it
// returns.
func (d *DB) Read(fn func(p *pebble.DB) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.read(fn)
}

// read is Read with d.mu held shared.
func (d *DB) read(fn func(p *pebble.DB) error) error {
	if d.p == nil {
		if herr := d.h.err(); herr != nil {
			return herr
		}
		return errClosed
	}
	return d.try(fn)
}

// Write runs fn, which builds and commits writes on the database, unless the store refuses
// writes (then it returns the *WriteError). An error of fn, or a panic in it, is taken as a
// failure of the disk: the store refuses writes from then on, until it has recovered.
func (d *DB) Write(fn func(p *pebble.DB) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if err := d.h.err(); err != nil {
		d.h.failures.Add(1)
		return err
	}
	if d.p == nil || d.readOnly {
		return errClosed
	}
	if err := d.try(fn); err != nil {
		return d.failed(err)
	}
	return nil
}

// WriteStable is Write for a Raft group's term and vote. hashicorp/raft panics when it cannot
// store its term, so while the store refuses writes this waits until it accepts them again (or
// is closed, and then fails).
func (d *DB) WriteStable(fn func(p *pebble.DB) error) error {
	for {
		err := d.Write(fn)
		if err == nil || !errors.Is(err, ErrWritesFailing) {
			return err
		}
		_, changed := d.h.state()
		select {
		case <-changed:
		case <-d.closing:
			return err
		}
	}
}

// Health reports whether the store accepts writes.
func (d *DB) Health() Health { return d.h.report() }

func (d *DB) try(fn func(p *pebble.DB) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("storage: pebble: %v", panicText(r))
			// The deferred call runs on top of the panicking frames: the stack still shows
			// whether the panic came out of the commit pipeline.
			if bytes.Contains(debug.Stack(), commitPipelineFrame) {
				d.stick(err)
			}
		}
	}()
	return fn(d.p)
}

// commitPipelineFrame names the function of Pebble's commit pipeline that a panic leaves locked
// (pebble commit.go: commitPipeline.Commit, whose prepare holds commitPipeline.mu while it writes
// the WAL and leaves its batch unpublished).
var commitPipelineFrame = []byte("pebble/v2.(*commitPipeline).Commit(")

// stick makes the store stuck: a commit panicked inside Pebble's commit pipeline, which no
// commit, close or reopen in this process gets past any more.
func (d *DB) stick(cause error) {
	d.broken.Store(true)
	if d.h.stick(cause) {
		d.log.Error("storage: a commit failed inside Pebble and left its commit pipeline locked: no write can complete "+
			"and the store cannot be reopened in this process; restart the server (what was acknowledged is in the WAL, "+
			"replayed at the start)", "dir", d.dir, "err", cause)
	}
}

func panicText(r any) string {
	if f, ok := r.(fatalPanic); ok {
		return f.msg
	}
	return fmt.Sprint(r)
}

// failed records a write that Pebble failed and starts the recovery; it returns the store's
// *WriteError.
func (d *DB) failed(cause error) error {
	d.broken.Store(true)
	if d.h.fail(cause) {
		d.log.Error("storage: a write failed; refusing writes until the disk accepts them again (reads go on)",
			"dir", d.dir, "err", cause)
		go d.recoverLoop()
	}
	return d.h.err()
}

// diskFull is called when a write used the reserve: the writes in progress complete, and the
// store refuses new ones until the disk has room again.
func (d *DB) diskFull(cause error) {
	if d.h.fail(cause) {
		d.log.Error("storage: the disk is full; refusing writes until it has room again (reads go on)",
			"dir", d.dir, "err", cause)
		go d.recoverLoop()
	}
}

// recoverLoop probes the directory until a write succeeds, then reopens the database.
func (d *DB) recoverLoop() {
	for attempt := 0; ; attempt++ {
		select {
		case <-d.closing:
			return
		case <-time.After(d.recoverEvery):
		}
		if d.h.isStuck() {
			return // nothing in this process can reopen the database (stick)
		}
		if err := d.res.allocate(); err != nil {
			continue
		}
		if err := probe(d.dir); err != nil {
			continue
		}
		if d.broken.Load() {
			if err := d.reopen(); err != nil {
				d.log.Error("storage: the disk accepts writes again but reopening the store failed; retrying", "dir", d.dir, "err", err)
				continue
			}
			d.broken.Store(false)
		}
		d.h.recovered()
		d.log.Info("storage: writes succeed again; the store accepts writes", "dir", d.dir)
		return
	}
}

// reopen closes the failed database and opens it again. When the read-write open fails, it
// opens the database read-only so that reads go on, and returns the error.
func (d *DB) reopen() error {
	deadline := time.Now().Add(reopenWait)
	for !d.mu.TryLock() {
		if time.Now().After(deadline) {
			return errors.New("a write is stuck inside Pebble since the failure; restart the server")
		}
		select {
		case <-d.closing:
			return errClosed
		case <-time.After(10 * time.Millisecond):
		}
	}
	defer d.mu.Unlock()
	if d.h.isStuck() {
		return errStuck // a panic may have come out of the pipeline while this waited
	}
	if d.p != nil {
		if err := closePebble(d.p); err != nil {
			d.log.Warn("storage: closing the failed store", "err", err)
		}
		d.p, d.readOnly = nil, false
	}
	p, err := openPebble(d.dir, d.po, false)
	if err == nil {
		d.p = p
		return nil
	}
	if ro, rerr := openPebble(d.dir, d.po, true); rerr == nil {
		d.p, d.readOnly = ro, true
	}
	return err
}

func openPebble(dir string, po *pebble.Options, readOnly bool) (p *pebble.DB, err error) {
	o := *po
	o.ReadOnly = readOnly
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pebble: %v", panicText(r))
		}
	}()
	return pebble.Open(dir, &o)
}

func closePebble(p *pebble.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pebble: %v", panicText(r))
		}
	}()
	return p.Close()
}

// probe writes, fsyncs and removes a file in dir.
func probe(dir string) error {
	path := filepath.Join(dir, "write-probe")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	_, err = f.Write(make([]byte, probeBytes))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// CheckWritable writes, fsyncs and removes a probe file in dir, for a start that should say at
// once, in one line, when its disk does not take writes.
func CheckWritable(dir string) error {
	if err := probe(dir); err != nil {
		return fmt.Errorf("storage: %s does not accept writes: %w", dir, err)
	}
	return nil
}

// pebbleLogger sends Pebble's logs to the server log: informational ones at debug level, errors
// at error level. Fatalf does not exit the process: on a committing goroutine (Pebble's
// "fatal commit error", which would otherwise report the failed commit as a success) it panics
// for Write to recover; elsewhere (a background flush or compaction that could not write its
// manifest) it logs and makes the store refuse writes until it has reopened the database.
type pebbleLogger struct{ d *DB }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.d.log.Debug("pebble: " + strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.d.log.Error("pebble: " + strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	if strings.HasPrefix(format, "pebble: fatal commit error") {
		panic(fatalPanic{msg: msg})
	}
	l.d.log.Error("pebble: fatal: " + msg)
	l.d.broken.Store(true)
	if l.d.h.fail(errors.New(msg)) {
		go l.d.recoverLoop()
	}
}

// eventListener reports Pebble's background errors and detected corruption to the server log;
// a background error (a flush or compaction that could not write) makes the store refuse writes
// until the disk accepts them again.
func (d *DB) eventListener() *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			if errors.Is(err, pebble.ErrCorruption) {
				return // damage, not a failing disk: DataCorruption logs it, and reads report it
			}
			d.broken.Store(true)
			if d.h.fail(err) {
				d.log.Error("storage: a background write failed; refusing writes until the disk accepts them again",
					"dir", d.dir, "err", err.Error())
				go d.recoverLoop()
			}
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			d.log.Error("storage: corrupt data", "file", info.Path, "err", info.Details.Error())
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			d.stalls.begin()
			d.log.Warn("storage: write stall", "reason", info.Reason)
		},
		WriteStallEnd: d.stalls.end,
		// Each memtable comes with a WAL: its creation dates the memtable (spans.go).
		WALCreated: func(info pebble.WALCreateInfo) {
			if info.Err == nil {
				d.spans.memtables.add(time.Now())
			}
		},
	}
}
