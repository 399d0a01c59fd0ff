package faultfs

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleDirEnv tells the test binary, re-run as a child, to be the Pebble writer of
// TestPebblePowerFailure in that directory (see TestMain).
const pebbleDirEnv = "FAULTFS_PEBBLE_CHILD_DIR"

const pebbleKeys = 300

func TestPebbleOnTheMount(t *testing.T) {
	_, mnt := mount(t)
	dir := filepath.Join(mnt, "db")
	db, err := pebble.Open(dir, pebbleOptions(t))
	must(t, err)
	for i := range pebbleKeys {
		must(t, db.Set(fmt.Appendf(nil, "k-%04d", i), fmt.Appendf(nil, "v-%d", i), pebble.NoSync))
	}
	must(t, db.Flush()) // an sstable, a manifest edit, a new WAL
	for i := range pebbleKeys {
		must(t, db.Delete(fmt.Appendf(nil, "k-%04d", i*2), pebble.Sync))
	}
	must(t, db.Compact(t.Context(), []byte("k"), []byte("l"), true))
	must(t, db.Close())

	db, err = pebble.Open(dir, pebbleOptions(t))
	must(t, err)
	defer db.Close()
	for i := range pebbleKeys {
		v, closer, err := db.Get(fmt.Appendf(nil, "k-%04d", i))
		switch {
		case i%2 == 0 && err != pebble.ErrNotFound:
			t.Fatalf("deleted key %d: %v", i, err)
		case i%2 == 1 && err != nil:
			t.Fatalf("key %d: %v", i, err)
		case i%2 == 1:
			if string(v) != fmt.Sprintf("v-%d", i) {
				t.Fatalf("key %d holds %q", i, v)
			}
			closer.Close()
		}
	}
}

// TestPebblePowerFailure runs a Pebble writer in a child process, kills it with SIGKILL after
// it wrote keys with Sync and then keys with NoSync, drops the unsynced data, and reopens the
// database: every synced key must be there, and of the others at most a prefix (what a WAL
// rotation synced), never all of them.
func TestPebblePowerFailure(t *testing.T) {
	fsys, mnt := mount(t)
	dir := filepath.Join(mnt, "db")
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), pebbleDirEnv+"="+dir)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	must(t, err)
	must(t, child.Start())
	defer child.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		child.Process.Kill()
		child.Wait()
		t.Fatalf("the Pebble child said %q (%v)", line, err)
	}
	must(t, child.Process.Signal(syscall.SIGKILL))
	child.Wait()
	fsys.Drop()
	if st := fsys.Stats(); st.DroppedBytes == 0 {
		t.Fatalf("the drop discarded nothing: %+v", st)
	}

	db, err := pebble.Open(dir, pebbleOptions(t))
	must(t, err)
	defer db.Close()
	survived := 0
	for i := range pebbleKeys {
		if _, closer, err := db.Get(fmt.Appendf(nil, "synced-%04d", i)); err != nil {
			t.Fatalf("synced key %d after the power failure: %v", i, err)
		} else {
			closer.Close()
		}
		_, closer, err := db.Get(fmt.Appendf(nil, "unsynced-%04d", i))
		switch {
		case err == nil && survived < i:
			t.Fatalf("unsynced key %d survived but key %d did not: the WAL has a hole", i, survived)
		case err == nil:
			survived++
			closer.Close()
		case err != pebble.ErrNotFound:
			t.Fatal(err)
		}
	}
	if survived == pebbleKeys {
		t.Fatal("every unsynced key survived the power failure")
	}
	t.Logf("%d of %d unsynced keys survived (Pebble syncs a WAL when it rotates it)", survived, pebbleKeys)
	t.Logf("faultfs: %+v", fsys.Stats())
}

// TestMain lets the test binary be the child of TestPebblePowerFailure.
func TestMain(m *testing.M) {
	if dir := os.Getenv(pebbleDirEnv); dir != "" {
		if err := pebbleChild(dir); err != nil {
			fmt.Fprintln(os.Stderr, "pebble child:", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// pebbleChild writes keys with Sync, then keys with NoSync, says "ready" and waits to be
// killed.
func pebbleChild(dir string) error {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return err
	}
	for i := range pebbleKeys {
		if err := db.Set(fmt.Appendf(nil, "synced-%04d", i), []byte("v"), pebble.Sync); err != nil {
			return err
		}
	}
	for i := range pebbleKeys {
		// Values large enough to fill WAL blocks, which the WAL writer hands to the file unsynced.
		if err := db.Set(fmt.Appendf(nil, "unsynced-%04d", i), make([]byte, 200), pebble.NoSync); err != nil {
			return err
		}
	}
	time.Sleep(100 * time.Millisecond) // let the WAL writer pass the full blocks to the file
	fmt.Println("ready")
	time.Sleep(time.Hour)
	return nil
}

// pebbleOptions are Pebble's defaults with its log sent to the test's log.
func pebbleOptions(t *testing.T) *pebble.Options {
	return &pebble.Options{Logger: testLogger{t}}
}

// testLogger is a pebble.Logger writing to the test's log.
type testLogger struct{ t *testing.T }

func (l testLogger) Infof(format string, args ...any)  { l.t.Logf("pebble: "+format, args...) }
func (l testLogger) Errorf(format string, args ...any) { l.t.Errorf("pebble: "+format, args...) }
func (l testLogger) Fatalf(format string, args ...any) { l.t.Fatalf("pebble: "+format, args...) }

// quietLogger is a pebble.Logger for the child, whose output nobody reads.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
	os.Exit(1)
}
