package powerfail

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

const (
	defaultFaultRounds = 3
	// hangLimit is how long a request may go unanswered before it counts as hung: far beyond
	// any answer of a working server, which answers StorageError at once while writes fail.
	hangLimit = 60 * time.Second
	// stuckLog is what the server logs when it exits because its store is stuck
	// (server/storage guard.go, cmd/fila-server errStorageStuck).
	stuckLog = "the store is stuck after a failed write inside Pebble"
	// walRotationCrash is in the crash report of a process Pebble took down: when closing the
	// previous WAL fails as it rotates to a new one, rotateWAL panics with DB.mu released and
	// the caller's deferred Unlock is a fatal error (sync: unlock of unlocked mutex), which no
	// recover catches (pebble v2.1.7 db.go, commitWrite → makeRoomForWrite → rotateWAL). The
	// process exits 2, as in a crash; the restart must still find every acknowledged message.
	walRotationCrash = "pebble/v2.(*DB).rotateWAL("
	// sideQueues take 16 KiB enqueues beside the checked queue, so that many commits of the size
	// of a WAL block are in flight in Pebble when the disk fails (what can leave its commit
	// pipeline locked, and the server exiting stuck).
	sideQueues = 8
)

// TestDiskErrorsUnderLoad: the disk fails (EIO on every write, fsync and allocation) under
// enqueue and consume load. Every request is answered (Ok before the failure, StorageError after
// it), or its connection closed by a server that exits because its store is stuck and asks to be
// restarted; none hangs. Once the disk works again the server writes again (by itself, or after
// the restart it asked for), and after a power cut nothing acknowledged is lost.
// FILA_DISKFAULT_ROUNDS sets the rounds (default 3).
func TestDiskErrorsUnderLoad(t *testing.T) {
	rounds := defaultFaultRounds
	if s := os.Getenv("FILA_DISKFAULT_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FILA_DISKFAULT_ROUNDS=%q is not a positive integer", s)
		}
		rounds = n
	}
	r := newRun(t, true)
	for i := range sideQueues {
		r.createSideQueue(i)
	}
	outcomes := map[string]int{}
	for round := 1; round <= rounds; round++ {
		outcomes[r.faultRound(round)]++
		if vs := r.l.found(); len(vs) > 0 {
			r.report(vs)
			t.FailNow()
		}
	}
	t.Logf("outcomes of %d disk failures: %v", rounds, outcomes)
}

// createSideQueue creates side queue i.
func (r *run) createSideQueue(i int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := fila.Dial(ctx, r.srv.addr, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateQueue(ctx, fila.QueueConfig{Name: sideQueue(i)}); err != nil {
		r.t.Fatal(err)
	}
}

func sideQueue(i int) string { return fmt.Sprintf("side-%d", i) }

// produceSide enqueues 16 messages of 1 KiB per frame to side queue i until stop is closed or
// the connection ends; a request left unanswered for hangLimit is a violation. Nothing is
// checked of what the side queues store.
func (r *run) produceSide(stop <-chan struct{}, round, i int) {
	c, err := fila.Dial(context.Background(), r.srv.addr, nil)
	if err != nil {
		return
	}
	defer c.Close()
	msgs := make([]fila.Message, 16)
	for j := range msgs {
		msgs[j] = fila.Message{Queue: sideQueue(i), Payload: make([]byte, 1<<10)}
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		if _, err := r.enqueueAnswered(c, round, msgs); err != nil {
			return
		}
	}
}

// faultRound fails the disk under load, checks that every request is answered, lets the disk
// work again, then pulls the plug and checks what the restarted server stored. It returns what
// the server did while the disk failed.
func (r *run) faultRound(round int) string {
	var counts loadCounts
	stop := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	var producers, consumer sync.WaitGroup
	producers.Go(func() { r.produceAnswered(stop, round, "single", 1, &counts.single) })
	producers.Go(func() { r.produceAnswered(stop, round, "batch", 16, &counts.batched) })
	for i := range sideQueues {
		producers.Go(func() { r.produceSide(stop, round, i) })
	}
	consumer.Go(func() { consume(ctx, r.srv.addr, round, r.l, &counts) })
	failAt := time.Duration(30+rand.IntN(370)) * time.Millisecond
	time.Sleep(failAt)

	r.fs.FailWrites(syscall.EIO)
	refused := r.awaitRefusal(round)
	close(stop)
	producers.Wait() // each producer ends with an answered request: a hang is a violation
	cancel()
	consumer.Wait()
	r.fs.ResumeWrites()

	outcome := "answered StorageError"
	exited := false
	select {
	case <-r.srv.exited:
		exited = true
	default:
		if !refused {
			r.t.Fatalf("round %d: the server neither answered StorageError nor exited while the disk failed; its log:\n%s",
				round, r.srv.logs.tail(40))
		}
		exited = !r.awaitWritable(round) // it may have found its store stuck after answering StorageError
	}
	if exited {
		outcome = "exited (store stuck)"
		code, logs := r.srv.cmd.ProcessState.ExitCode(), r.srv.logs.String()
		switch {
		case code == 2 && strings.Contains(logs, walRotationCrash):
			outcome = "crashed in Pebble's WAL rotation"
		case code != 1 || !strings.Contains(logs, stuckLog):
			r.t.Fatalf("round %d: the server exited with code %d while the disk failed, without saying its store is stuck; its log:\n%s",
				round, code, r.srv.logs.tail(200))
		}
	} else {
		r.srv.kill()
	}
	r.fs.Drop()
	r.prev = r.srv
	r.start()
	stored, err := check(r.srv.addr, round, r.l)
	if err != nil {
		r.t.Fatalf("round %d: the check after the restart failed: %v\nlog of the restarted server:\n%s", round, err, r.srv.logs.tail(40))
	}
	r.t.Logf("round %d: disk failed %v in: %s; enqueues answered Ok %d single + %d batched, %d delivered, %d acks answered Ok; "+
		"%d writes and syncs failed so far; %d stored after the plug pull", round, failAt, outcome,
		counts.single.Load(), counts.batched.Load(), counts.delivered.Load(), counts.acked.Load(), r.fs.Stats().Failed, stored)
	return outcome
}

// produceAnswered enqueues batch messages per frame until stop is closed or the connection
// ends, recording every message answered Ok; a request left unanswered for hangLimit is a
// violation.
func (r *run) produceAnswered(stop <-chan struct{}, round int, name string, batch int, ok *atomic.Int64) {
	c, err := fila.Dial(context.Background(), r.srv.addr, nil)
	if err != nil {
		return
	}
	defer c.Close()
	for n := 0; ; {
		select {
		case <-stop:
			return
		default:
		}
		msgs := make([]fila.Message, batch)
		for i := range msgs {
			msgs[i] = fila.Message{Queue: queueName, Payload: fmt.Appendf(nil, "r%d/%s/%d", round, name, n)}
			n++
		}
		res, err := r.enqueueAnswered(c, round, msgs)
		if err != nil {
			return
		}
		for i, res := range res {
			if res.Err == nil {
				r.l.enqueueOk(res.ID, string(msgs[i].Payload))
				ok.Add(1)
			}
		}
	}
}

// enqueueAnswered is one Enqueue that counts as hung when unanswered for hangLimit.
func (r *run) enqueueAnswered(c *fila.Client, round int, msgs []fila.Message) ([]fila.EnqueueResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	res, err := c.Enqueue(ctx, msgs...)
	if errors.Is(err, context.DeadlineExceeded) {
		r.l.mu.Lock()
		r.l.violate(violation{kind: "hung", round: round, detail: fmt.Sprintf("an Enqueue of %d messages was not answered in %v", len(msgs), hangLimit)})
		r.l.mu.Unlock()
	}
	return res, err
}

// awaitRefusal enqueues on a new connection until the server answers StorageError (true) or
// has exited (false).
func (r *run) awaitRefusal(round int) bool {
	for {
		c, err := fila.Dial(context.Background(), r.srv.addr, nil)
		if err != nil {
			<-r.srv.exited // no connection: the server must be gone
			return false
		}
		res, err := r.enqueueAnswered(c, round, []fila.Message{{Queue: queueName, Payload: fmt.Appendf(nil, "r%d/probe", round)}})
		c.Close()
		switch {
		case errors.Is(err, fila.ErrStorage) || err == nil && errors.Is(res[0].Err, fila.ErrStorage):
			return true
		case errors.Is(err, context.DeadlineExceeded):
			return false
		case err != nil:
			select {
			case <-r.srv.exited:
				return false
			case <-time.After(hangLimit):
				r.t.Fatalf("round %d: an Enqueue while the disk failed: %v, and the server did not exit", round, err)
			}
		case res[0].Err == nil:
			r.l.enqueueOk(res[0].ID, fmt.Sprintf("r%d/probe", round)) // written before the failure took hold
		}
	}
}

// awaitWritable enqueues until the server stores a message again (true), within hangLimit, or
// has exited (false).
func (r *run) awaitWritable(round int) bool {
	deadline := time.Now().Add(hangLimit)
	for time.Now().Before(deadline) {
		select {
		case <-r.srv.exited:
			return false
		default:
		}
		c, err := fila.Dial(context.Background(), r.srv.addr, nil)
		if err != nil {
			select {
			case <-r.srv.exited:
				return false
			case <-time.After(hangLimit):
				r.t.Fatalf("round %d: after the disk recovered: %v; the server's log:\n%s", round, err, r.srv.logs.tail(40))
			}
		}
		payload := fmt.Sprintf("r%d/recovered", round)
		res, err := r.enqueueAnswered(c, round, []fila.Message{{Queue: queueName, Payload: []byte(payload)}})
		c.Close()
		if err == nil && res[0].Err == nil {
			r.l.enqueueOk(res[0].ID, payload)
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.t.Fatalf("round %d: the server did not write again within %v of the disk recovering; its log:\n%s", round, hangLimit, r.srv.logs.tail(40))
	return false
}
