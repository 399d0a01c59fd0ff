package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/tools/internal/fibpconn"
	"github.com/filamq/fila/tools/internal/procfs"
)

// benchQueues measures what idle queues cost: each is a Raft group (with its dead-letter queue)
// and an actor. It creates -queues of them, reads the server's RSS and idle CPU, restarts the
// server and measures how long until every queue answers again.
func benchQueues(r *runner) error {
	if r.srv.cmd == nil {
		fmt.Fprintln(os.Stderr, "   skipped: the server was not started by this tool")
		return nil
	}
	n := r.o.queues
	// The server holds at most max_queues queues; this workload needs n. Its goroutines are
	// counted through /debug/pprof.
	r.srv.args = append(r.srv.args, "--max-queues", strconv.Itoa(n))
	if !r.srv.pprof {
		r.srv.pprof = true
		r.srv.args = append(r.srv.args, "--pprof")
	}
	if err := r.srv.restart(); err != nil {
		return err
	}
	before := r.srv.rssBytes()
	if err := createIdleQueues(r, n); err != nil {
		return err
	}
	report(fmt.Sprintf("goroutines_%d_queues_just_created", n), float64(r.srv.goroutines()), "goroutines")
	awaitHibernation(r)
	report(fmt.Sprintf("goroutines_%d_idle_queues", n), float64(r.srv.goroutines()), "goroutines")
	report(fmt.Sprintf("rss_%d_idle_queues", n), float64(r.srv.rssBytes())/(1<<20), "MiB")
	report("rss_per_idle_queue", float64(r.srv.rssBytes()-before)/float64(n)/1024, "KiB")
	cpu := r.srv.cpuSeconds()
	time.Sleep(5 * time.Second)
	report(fmt.Sprintf("idle_cpu_%d_queues", n), (r.srv.cpuSeconds()-cpu)/5*100, "%")
	if err := wakeQueues(r, min(n, 1000)); err != nil {
		return err
	}
	return restartIdle(r, n)
}

// createIdleQueues creates queues idle-0 … idle-(n-1) over 8 connections and reports the rate.
func createIdleQueues(r *runner, n int) error {
	start := time.Now()
	var made atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := fibpconn.Dial(r.srv.addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for i := w; i < n; i += 8 {
				res, err := c.Call(&fibp.CreateQueue{Name: fmt.Sprintf("idle-%d", i)})
				if err != nil {
					errs <- err
					return
				}
				if code := res.(*fibp.CreateQueueResult).ErrorCode; code != fibp.CodeOk {
					errs <- fmt.Errorf("create idle-%d: %v", i, code)
					return
				}
				if m := made.Add(1); m%500 == 0 {
					fmt.Fprintf(os.Stderr, "\r   created %d / %d (%.0f/s)", m, n, float64(m)/time.Since(start).Seconds())
				}
			}
		}()
	}
	wg.Wait()
	fmt.Fprintln(os.Stderr)
	select {
	case err := <-errs:
		return err
	default:
	}
	report("queue_create_rate", float64(n)/time.Since(start).Seconds(), "queues/s")
	return nil
}

// awaitHibernation waits until idle queues have hibernated, after queue_idle_timeout (10 s by
// default): until the server's goroutine count stops falling (a minute at most).
func awaitHibernation(r *runner) {
	for prev, i := -1, 0; i < 60; i++ {
		time.Sleep(time.Second)
		g := r.srv.goroutines()
		if g == prev && i >= 12 {
			break
		}
		prev = g
	}
}

// restartIdle stops the server holding n idle queues (and their dead-letter queues), starts it
// again and reports how long until every queue answers, with the new process's CPU and memory.
func restartIdle(r *runner, n int) error {
	start := time.Now()
	r.srv.terminate()
	report(fmt.Sprintf("shutdown_%d_idle_queues", n), time.Since(start).Seconds(), "s")
	launched := time.Now()
	if err := r.srv.launch(); err != nil {
		return err
	}
	c, err := fibpconn.Dial(r.srv.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Call(&fibp.ListQueues{})
	if err != nil {
		return err
	}
	if got := len(res.(*fibp.ListQueuesResult).Queues); got < 2*n {
		return fmt.Errorf("after the restart %d queues answer, want at least %d", got, 2*n)
	}
	report(fmt.Sprintf("restart_%d_idle_queues", n), time.Since(start).Seconds(), "s")
	report(fmt.Sprintf("start_until_ready_%d_idle_queues", n), time.Since(launched).Seconds(), "s")
	// CPU the new process spent until ready: comparable across runs on a loaded machine, where
	// the wall time is not.
	report(fmt.Sprintf("restart_cpu_%d_idle_queues", n), r.srv.cpuSeconds(), "s")
	report(fmt.Sprintf("rss_%d_idle_queues_after_restart", n), float64(r.srv.rssBytes())/(1<<20), "MiB")
	report(fmt.Sprintf("goroutines_%d_idle_queues_after_restart", n), float64(r.srv.goroutines()), "goroutines")
	return nil
}

// wakeQueues enqueues one message to each of the first k (sleeping) queues, one at a time, and
// reports the mean time an enqueue to a sleeping queue takes (its Raft group reopens).
func wakeQueues(r *runner, k int) error {
	c, err := fibpconn.Dial(r.srv.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	start := time.Now()
	for i := range k {
		res, err := c.Call(&fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: fmt.Sprintf("idle-%d", i), Payload: []byte("wake")}}})
		if err != nil {
			return err
		}
		if code := res.(*fibp.EnqueueResult).Results[0].ErrorCode; code != fibp.CodeOk {
			return fmt.Errorf("enqueue to idle-%d: %v", i, code)
		}
	}
	report("enqueue_to_sleeping_queue", float64(time.Since(start).Microseconds())/float64(k)/1000, "ms")
	return nil
}

// goroutines reads the server's goroutine count from /debug/pprof (0 when it does not serve it).
func (s *server) goroutines() int {
	if !s.pprof {
		return 0
	}
	resp, err := http.Get("http://" + s.httpAddr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "goroutine profile: total ")))
	return n
}

// cpuSeconds reads the server's user + system CPU time from /proc.
func (s *server) cpuSeconds() float64 { return procfs.CPU(s.cmd.Process.Pid).Seconds() }
