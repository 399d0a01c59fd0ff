package session

import (
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/auth"
)

// Every admin opcode is classified; those that act on one queue need admin on it, those that read
// one throttle need throttle on its name, and what the table does not know needs a superadmin key.
func TestAdminNeed(t *testing.T) {
	queue := map[fibp.Opcode]fibp.Frame{
		fibp.OpCreateQueue: &fibp.CreateQueue{Name: "q"}, fibp.OpUpdateQueue: &fibp.UpdateQueue{Queue: "q"},
		fibp.OpDeleteQueue: &fibp.DeleteQueue{Queue: "q"}, fibp.OpGetStats: &fibp.GetStats{Queue: "q"},
		fibp.OpRedrive: &fibp.Redrive{DLQQueue: "q"},
	}
	throttle := map[fibp.Opcode]fibp.Frame{
		fibp.OpGetThrottleStats: &fibp.GetThrottleStats{Name: "t"}, fibp.OpGetThrottleBucket: &fibp.GetThrottleBucket{Name: "t"},
	}
	for op := range adminOps {
		body := []byte(nil)
		if f, ok := queue[op]; ok {
			body = f.AppendTo(nil)
		}
		if f, ok := throttle[op]; ok {
			body = f.AppendTo(nil)
		}
		n, err := AdminNeed(op, body)
		switch {
		case throttle[op] != nil:
			if err != nil || n.Superadmin || n.Filtered || n.Kind != auth.Throttle || n.Queue != "t" {
				t.Errorf("%v: %+v %v", op, n, err)
			}
		case queue[op] != nil:
			if err != nil || n.Superadmin || n.Filtered || n.Kind != auth.Admin || n.Queue != "q" {
				t.Errorf("%v: %+v %v", op, n, err)
			}
		case op == fibp.OpListQueues || op == fibp.OpGetRoutes:
			if !n.Filtered {
				t.Errorf("%v is not filtered: %+v", op, n)
			}
		case !n.Superadmin:
			t.Errorf("%v does not need superadmin: %+v", op, n)
		}
	}
	if n, _ := AdminNeed(fibp.Opcode(0x42), nil); !n.Superadmin {
		t.Error("an unknown admin opcode is open")
	}
	if _, err := AdminNeed(fibp.OpGetStats, []byte{0xff}); err == nil {
		t.Error("a malformed GetStats decoded")
	}
}
