package transport

import (
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/broker"
)

// CreateQueue beyond max_queues is refused with ChannelFull and a message naming the limit; a
// deletion makes room again, and a restart with a lower limit keeps every existing queue.
func TestMaxQueues(t *testing.T) {
	dir := t.TempDir()
	addr, stop := startAtWith(t, dir, func(o *broker.Options) { o.MaxQueues = 3 })
	c := dialRaw(t, addr)
	c.Handshake()
	for _, name := range []string{"a", "b", "c"} {
		newQueue(t, c, &fibp.CreateQueue{Name: name})
	}
	refused := func(reqID uint32, name string) {
		t.Helper()
		f := c.Call(reqID, &fibp.CreateQueue{Name: name})
		e, ok := f.(*fibp.Error)
		if !ok || e.ErrorCode != fibp.CodeChannelFull || !strings.Contains(e.Message, "max_queues") {
			t.Fatalf("CreateQueue beyond the limit answered %#v", f)
		}
		if e.Metadata[fibp.MetaRetryAfterMs] != "" {
			t.Fatalf("a retry time suggested where waiting does not help: %v", e.Metadata)
		}
	}
	refused(1, "d")
	if r := c.Call(2, &fibp.DeleteQueue{Queue: "b"}).(*fibp.DeleteQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("DeleteQueue: %v", r.ErrorCode)
	}
	newQueue(t, c, &fibp.CreateQueue{Name: "d"})
	stop()

	addr, stop = startAtWith(t, dir, func(o *broker.Options) { o.MaxQueues = 2 })
	defer stop()
	c = dialRaw(t, addr)
	c.Handshake()
	if n := len(c.Call(3, &fibp.ListQueues{}).(*fibp.ListQueuesResult).Queues); n != 6 {
		t.Fatalf("after a restart with a lower limit %d queues are listed, want 6 (3 and their DLQs)", n)
	}
	refused(4, "e")
}
