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
// RSS that 1,000 idle queues with both hooks add.
func benchLua(r *runner) error {
	// The idle queues first, while the server's heap holds no backlog that a GC could return
	// during the measurement.
	if err := benchHookedQueues(r, 1000); err != nil {
		return err
	}
	rates, cpuPerMsg := map[bool]float64{}, map[bool]float64{}
	for _, hooked := range []bool{false, true} {
		cfg := fibp.CreateQueue{}
		label := "lua-none"
		if hooked {
			cfg.OnEnqueueScript, label = wire.Some(benchHook), "lua-on-enqueue"
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
		cpu, n := r.srv.cpuSeconds(), ct.enqueued.Load()
		rates[hooked] = measure(label, r.o.duration, ct.enqueued.Load)
		cpuPerMsg[hooked] = (r.srv.cpuSeconds() - cpu) / float64(ct.enqueued.Load()-n) * 1e6
		stop()
	}
	report("enqueue_batched_1kb_no_hook", rates[false], "msg/s")
	report("enqueue_batched_1kb_on_enqueue", rates[true], "msg/s")
	report("on_enqueue_overhead_wall", (1/rates[true]-1/rates[false])*1e6, "us/msg")
	if r.srv.cmd != nil { // the server's CPU time (user + system) per accepted message
		report("server_cpu_per_msg_no_hook", cpuPerMsg[false], "us/msg")
		report("server_cpu_per_msg_on_enqueue", cpuPerMsg[true], "us/msg")
		report("on_enqueue_overhead_cpu", cpuPerMsg[true]-cpuPerMsg[false], "us/msg")
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
	return nil
}
