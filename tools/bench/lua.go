package main

import (
	"fmt"
	"os"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/tools/internal/fibpconn"
)

// benchHook is a typical on_enqueue: tenant fairness by header, a weight per tier, an attribute.
const benchHook = `
local weights = { gold = 3 }
function on_enqueue(msg)
  local tenant = msg.headers.group or "anonymous"
  local tier = (tenant == "0") and "gold" or "free"
  return { fairness_key = tenant, weight = weights[tier] or 1, attributes = { tier = tier } }
end`

const benchFailureHook = `
function on_failure(msg)
  if msg.attempts >= 3 then return { action = "dlq" } end
  return { action = "retry", delay_ms = 1000 }
end`

// benchLua measures what on_enqueue costs per message: the same batched enqueue workload on a
// queue with the hook and on one without, and the difference of their per-message wall times and
// of the server's CPU time per message (the steadier figure on a shared machine); before that, the
// RSS that 1,000 idle queues with both hooks add. The two sides run in four half-length
// segments, without, with, with, without, so that what grows during the run (the store, its
// compactions, the backlog the garbage collector walks) weighs on both alike.
func benchLua(r *runner) error {
	// The idle queues first, while the server's heap holds no backlog that a GC could return
	// during the measurement.
	if err := benchHookedQueues(r, 1000); err != nil {
		return err
	}
	var msgs, secs, cpu [2]float64 // by hooked
	for _, hooked := range []bool{false, true, true, false} {
		cfg := fibp.CreateQueue{}
		label, side := "lua-none", 0
		if hooked {
			cfg.OnEnqueueScript, label, side = wire.Some(benchHook), "lua-on-enqueue", 1
		}
		q, err := r.newQueueWith(label, cfg)
		if err != nil {
			return err
		}
		ct := &counters{}
		stop, err := r.start(load{queue: q, producers: 4, window: 4, batch: 100, payload: 1024, groups: 10}, ct)
		if err != nil {
			return err
		}
		c0, n0 := r.srv.cpuSeconds(), ct.enqueued.Load()
		rate := measure(label, r.o.duration/2, ct.enqueued.Load)
		n := float64(ct.enqueued.Load() - n0)
		msgs[side] += n
		secs[side] += n / rate
		cpu[side] += r.srv.cpuSeconds() - c0
		stop()
	}
	rates := [2]float64{msgs[0] / secs[0], msgs[1] / secs[1]}
	report("enqueue_batched_1kb_no_hook", rates[0], "msg/s")
	report("enqueue_batched_1kb_on_enqueue", rates[1], "msg/s")
	report("on_enqueue_overhead_wall", (1/rates[1]-1/rates[0])*1e6, "us/msg")
	if r.srv.cmd != nil { // the server's CPU time (user + system) per accepted message
		perMsg := [2]float64{cpu[0] / msgs[0] * 1e6, cpu[1] / msgs[1] * 1e6}
		report("server_cpu_per_msg_no_hook", perMsg[0], "us/msg")
		report("server_cpu_per_msg_on_enqueue", perMsg[1], "us/msg")
		report("on_enqueue_overhead_cpu", perMsg[1]-perMsg[0], "us/msg")
	}
	return nil
}

// benchHookedQueues creates n idle queues with both hooks and reports the RSS they add.
func benchHookedQueues(r *runner, n int) error {
	if r.srv.cmd == nil {
		fmt.Fprintln(os.Stderr, "   skipped: the server was not started by this tool")
		return nil
	}
	c, err := fibpconn.Dial(r.srv.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	before := r.srv.rssBytes()
	for i := range n {
		res, err := c.Call(&fibp.CreateQueue{Name: fmt.Sprintf("hooked-%d", i),
			OnEnqueueScript: wire.Some(benchHook), OnFailureScript: wire.Some(benchFailureHook)})
		if err != nil {
			return err
		}
		if res, ok := res.(*fibp.CreateQueueResult); !ok || res.ErrorCode != fibp.CodeOk {
			return fmt.Errorf("create hooked-%d: %#v", i, res)
		}
	}
	time.Sleep(2 * time.Second)
	after := r.srv.rssBytes()
	report(fmt.Sprintf("rss_added_by_%d_hooked_idle_queues", n), float64(after-before)/(1<<20), "MiB")
	report("rss_per_hooked_idle_queue", float64(after-before)/float64(n)/1024, "KiB")
	report("rss_server_total", float64(after)/(1<<20), "MiB")
	// Idle queues hibernate after queue_idle_timeout (10 s by default); the figure at idle is
	// the one once they sleep.
	time.Sleep(hibernationWait)
	report(fmt.Sprintf("rss_server_total_%d_hooked_queues_asleep", n), float64(r.srv.rssBytes())/(1<<20), "MiB")
	return nil
}

// hibernationWait is how long idle queues take to hibernate with the default
// queue_idle_timeout (10 s), with a margin.
const hibernationWait = 13 * time.Second
