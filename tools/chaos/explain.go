package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Explain says what happened during a window: the faults that overlap it, then for each client
// its operations that overlap it, grouped by kind, queue, node and answer in the order of their
// first invocation, with how many there were, when, and the longest wait for an answer. A
// window in which every producer waits on one node, or loops on NotLeader answers naming a
// node that is down, shows so. node names a NotLeader's leader_addr (nil: the address as it
// is). At most limit groups are shown for each client and queue (the longest waits first when
// cut; 0: all).
func Explain(h []Op, w Window, node func(addr string) string, limit int) []string {
	name := func(addr string) string {
		if node != nil {
			return node(addr)
		}
		return addr
	}
	lines, groups := explainGroups(h, w)
	for _, gs := range groupsByClient(groups, limit) {
		for _, g := range gs {
			lines = append(lines, g.line(name))
		}
	}
	return lines
}

// explainKey is what the operations of one line of an explanation share.
type explainKey struct {
	client int
	kind   Kind
	queue  string
	node   uint64
	out    Outcome
	err    string
	leader string
	addr   string // a Dial's node
}

// explainGroup is one line of an explanation: the operations of a key.
type explainGroup struct {
	explainKey
	n             int
	first, last   time.Duration
	longest       time.Duration
	longestInvoke time.Duration
}

// explainGroups returns a line for each fault in w and the operations in it grouped by key.
func explainGroups(h []Op, w Window) ([]string, map[explainKey]*explainGroup) {
	var faults []string
	groups := map[explainKey]*explainGroup{}
	for _, op := range h {
		if op.Final || op.Kind == Drained || op.Complete < w.Start || op.Invoke > w.End {
			continue
		}
		if op.Kind == Fault {
			faults = append(faults, fmt.Sprintf("  fault %s from %v to %v", op.Value, round(op.Invoke), round(op.Complete)))
			continue
		}
		k := explainKey{client: op.Client, kind: op.Kind, queue: op.Queue, node: op.Node, out: op.Outcome, err: shortErr(op.Err), leader: op.Leader}
		if op.Kind == Dial {
			k.addr = op.Value
		}
		g := groups[k]
		if g == nil {
			g = &explainGroup{explainKey: k, first: op.Invoke}
			groups[k] = g
		}
		g.n++
		g.first, g.last = min(g.first, op.Invoke), max(g.last, op.Complete)
		if d := op.Complete - op.Invoke; op.Kind != Deliver && d >= g.longest {
			g.longest, g.longestInvoke = d, op.Invoke
		}
	}
	return faults, groups
}

// groupsByClient orders the groups by client, and each client's by their first operation,
// keeping at most limit groups per client and queue (the longest waits; 0: all).
func groupsByClient(groups map[explainKey]*explainGroup, limit int) [][]*explainGroup {
	type cq struct {
		client int
		queue  string
	}
	byClient := map[int][]*explainGroup{}
	perQueue := map[cq][]*explainGroup{}
	var clients []int
	for _, g := range groups {
		if byClient[g.client] == nil {
			clients = append(clients, g.client)
			byClient[g.client] = []*explainGroup{}
		}
		perQueue[cq{g.client, g.queue}] = append(perQueue[cq{g.client, g.queue}], g)
	}
	for k, gs := range perQueue {
		if limit > 0 && len(gs) > limit {
			sort.Slice(gs, func(i, j int) bool { return gs[i].longest > gs[j].longest })
			gs = gs[:limit]
		}
		byClient[k.client] = append(byClient[k.client], gs...)
	}
	sort.Ints(clients)
	out := make([][]*explainGroup, len(clients))
	for i, c := range clients {
		gs := byClient[c]
		sort.Slice(gs, func(i, j int) bool { return gs[i].first < gs[j].first })
		out[i] = gs
	}
	return out
}

// line renders the group, naming nodes by name.
func (g *explainGroup) line(name func(addr string) string) string {
	on := fmt.Sprintf("on node %d", g.node)
	if g.kind == Dial && g.node == 0 {
		on = "to " + name(g.addr)
	}
	s := fmt.Sprintf("  client %d %s %s %s: %d× %s from %v to %v", g.client, g.kind, g.queue, on, g.n, g.out, round(g.first), round(g.last))
	switch g.kind {
	case Deliver:
	case Subscribe: // from the Consume call to the subscription's end
		s += fmt.Sprintf(", longest lived %v (from %v)", round(g.longest), round(g.longestInvoke))
	default:
		s += fmt.Sprintf(", longest %v (from %v)", round(g.longest), round(g.longestInvoke))
	}
	if g.err != "" {
		s += ": " + g.err
	}
	if g.leader != "" {
		s += " → leader_addr " + name(g.leader)
	}
	return s
}

// shortErr drops what an error repeats of the operation (the SDK's prefix, the queue's name).
func shortErr(err string) string {
	err = strings.TrimPrefix(err, "fila: ")
	for _, p := range []string{"queue \"", "message "} {
		if strings.HasPrefix(err, p) {
			if i := strings.Index(err[len(p):], ": "); i > 0 {
				err = err[len(p)+i+2:]
			}
		}
	}
	return err
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// QueueWindows are the pauses of at least UnavailableGap between one queue's successful
// enqueues, for each queue (final drain excluded): a fault of the node that leads one queue
// shows there while the run's windows, across every queue, may see nothing.
func QueueWindows(h []Op) map[string][]Window {
	times := map[string][]time.Duration{}
	var end time.Duration
	for _, op := range h {
		if op.Final || op.Kind == Fault || op.Kind == Drained {
			continue
		}
		end = max(end, op.Complete)
		if op.Kind == Enqueue && op.Outcome == Ok && op.Queue != "" {
			times[op.Queue] = append(times[op.Queue], op.Complete)
		}
	}
	out := map[string][]Window{}
	for q, ts := range times {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		last := ts[0]
		for _, t := range append(ts[1:], end) {
			if t-last >= UnavailableGap {
				out[q] = append(out[q], Window{What: "enqueue " + q, Start: last, End: t})
			}
			last = t
		}
		if out[q] == nil {
			out[q] = []Window{}
		}
	}
	return out
}
