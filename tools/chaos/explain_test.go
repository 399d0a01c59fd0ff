package chaos

import (
	"strings"
	"testing"
	"time"
)

func TestExplainGroupsWhatEachClientDid(t *testing.T) {
	s := time.Second
	h := []Op{
		{Client: -1, Kind: Fault, Value: "SIGSTOP node 1", Outcome: Ok, Invoke: 10 * s, Complete: 12 * s},
		{Client: 0, Kind: Enqueue, Value: "a", Queue: "q-0", Node: 1, Outcome: Unknown, Invoke: 10 * s, Complete: 15 * s, Err: "context deadline exceeded"},
		{Client: 3, Kind: Subscribe, Queue: "q-1", Node: 1, Outcome: Unknown, Invoke: 11 * s, Complete: 11*s + time.Millisecond,
			Err: `fila: queue "q-1": this node does not lead queue "q-1" (NotLeader)`, Leader: "127.0.0.1:3"},
		{Client: 3, Kind: Subscribe, Queue: "q-1", Node: 1, Outcome: Unknown, Invoke: 12 * s, Complete: 12*s + 2*time.Millisecond,
			Err: `fila: queue "q-1": this node does not lead queue "q-1" (NotLeader)`, Leader: "127.0.0.1:3"},
		{Client: 1, Kind: Enqueue, Value: "b", Queue: "q-2", Node: 2, Outcome: Ok, Invoke: 20 * s, Complete: 20 * s}, // after the window
	}
	name := func(addr string) string { return map[string]string{"127.0.0.1:3": "node 3"}[addr] }
	got := strings.Join(Explain(h, Window{What: "enqueue", Start: 10 * s, End: 16 * s}, name, 6), "\n")
	for _, want := range []string{
		"fault SIGSTOP node 1 from 10s to 12s",
		"client 0 enqueue q-0 on node 1: 1× unknown from 10s to 15s, longest 5s (from 10s): context deadline exceeded",
		`client 3 subscribe q-1 on node 1: 2× unknown from 11s to 12.002s, longest lived 2ms (from 12s): this node does not lead queue "q-1" (NotLeader) → leader_addr node 3`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Explain lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "q-2") {
		t.Errorf("Explain shows an operation after the window:\n%s", got)
	}
}

func TestQueueWindowsArePerQueue(t *testing.T) {
	s := time.Second
	h := []Op{
		{Kind: Enqueue, Queue: "a", Outcome: Ok, Invoke: 0, Complete: 1 * s},
		{Kind: Enqueue, Queue: "b", Outcome: Ok, Invoke: 0, Complete: 1 * s},
		{Kind: Enqueue, Queue: "b", Outcome: Ok, Invoke: 2 * s, Complete: 2 * s},
		{Kind: Enqueue, Queue: "a", Outcome: Unknown, Invoke: 1 * s, Complete: 4 * s},
		{Kind: Enqueue, Queue: "a", Outcome: Ok, Invoke: 4 * s, Complete: 5 * s},
		{Kind: Enqueue, Queue: "b", Outcome: Ok, Invoke: 5 * s, Complete: 5 * s},
		{Kind: Deliver, Queue: "a", Final: true, Outcome: Ok, Invoke: 9 * s, Complete: 9 * s}, // the drain
	}
	w := QueueWindows(h)
	if len(w["a"]) != 1 || w["a"][0].Start != 1*s || w["a"][0].End != 5*s {
		t.Errorf("queue a: %v, want one window from 1s to 5s", w["a"])
	}
	if len(w["b"]) != 2 || w["b"][1].Start != 2*s || w["b"][1].End != 5*s {
		t.Errorf("queue b: %v, want windows 1s-2s and 2s-5s", w["b"])
	}
}
