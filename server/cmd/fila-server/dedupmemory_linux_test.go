package main

import (
	"strconv"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/internal/fibptest"
)

// In a memory-limited cgroup, a producer that sends new deduplication identities without end,
// with a window of 7 days, is refused ChannelFull once the identities fill memory_budget (here
// 64 MiB, about half a million identities at 128 bytes), and the server goes on serving.
// Before, every identity was kept outside the budget (231 bytes each): the server grew until the
// cgroup's 256 MiB OOM-killed it.
func TestNewIdentitiesCannotOOMTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	const limit = 512 << 20
	procs := limitedCgroup(t, limit)
	p, addr, logs := startInCgroup(t, procs, "--memory-budget", "64MiB")
	c := fibptest.Dial(t, addr)
	c.Handshake()
	for _, kv := range [][2]string{{"dedup.max_identities", "100000000"}, {"dedup.max_identities_per_queue", "100000000"}} {
		c.Call(1, &fibp.SetConfig{Key: kv[0], Value: kv[1]}) // the memory budget is the bound here
	}
	if r := c.Call(2, &fibp.CreateQueue{Name: "once", DedupWindowMs: 7 * 24 * 60 * 60 * 1000}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue: %v", r.ErrorCode)
	}
	const frame, most = 2000, 4_000_000
	msgs := make([]fibp.EnqueueMessage, frame)
	accepted, refused := 0, 0
	for sent := 0; refused == 0; sent += frame {
		if sent >= most {
			t.Fatalf("%d new identities were all accepted: nothing bounds them", sent)
		}
		select {
		case <-p.done:
			t.Fatalf("the server died (%v) after %d new identities:\n%s", p.err, accepted, tail(logs.String()))
		default:
		}
		if sent%200_000 == 0 {
			t.Logf("%d accepted", accepted)
		}
		for i := range msgs {
			msgs[i] = fibp.EnqueueMessage{Queue: "once", Payload: []byte("x"), IdempotencyKey: wire.Some(strconv.Itoa(sent + i))}
		}
		switch r := c.Call(3, &fibp.Enqueue{Messages: msgs}).(type) {
		case *fibp.EnqueueResult:
			for _, res := range r.Results {
				switch res.ErrorCode {
				case fibp.CodeOk:
					accepted++
				case fibp.CodeChannelFull:
					refused++
				default:
					t.Fatalf("an identity answered %v", res.ErrorCode)
				}
			}
		case *fibp.Error:
			if r.ErrorCode != fibp.CodeChannelFull {
				t.Fatalf("Enqueue answered %+v", r)
			}
			refused += frame
		}
	}
	if res, ok := c.Call(4, &fibp.GetStats{Queue: "once"}).(*fibp.GetStatsResult); !ok || res.ErrorCode != fibp.CodeOk || res.Depth != uint64(accepted) {
		t.Fatalf("after the refusals, GetStats answered %#v (accepted %d)", res, accepted)
	}
	peak := cgroupPeak(procs)
	t.Logf("%d identities accepted before the first refusal (%d bytes at 128 each, of a 64 MiB budget); the cgroup's peak %s bytes of %d",
		accepted, accepted*128, peak, limit)
}

// tail is the end of a server's log.
func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}
