package broker

import (
	"runtime"
	"time"

	"github.com/filamq/fila/lua/sandbox"
)

// Script budgets: lua.timeout_ms bounds one call of a hook; a scriptBudget bounds the calls a
// queue makes for one piece of work — the on_enqueue calls of the Enqueue requests one round
// runs (lua.request_budget_ms), or one reclassification pass over parked messages
// (lua.reclassify_budget_ms) — so that a frame of thousands of messages, or a parked backlog,
// keeps its queue busy for a bounded time and the requests behind it are answered. The budget
// is checked between calls: work may pass it by at most one call's own budget.
//
// Like the sandbox's, the budget is CPU time where the thread's CPU clock can be read, so that a
// loaded machine does not cut work short: the calls' wall time is summed (two cheap clock reads
// a call), and only when that sum reaches the limit is the thread's CPU clock read; the work is
// over when the CPU its thread used since the budget began has reached the limit too (both are
// at least what the calls used). The goroutine holds its OS thread from begin to end, as a
// hooks.Batch does.
type scriptBudget struct {
	limit  time.Duration
	spent  time.Duration // the calls' wall time, or the CPU reading that replaced it
	cpu0   time.Duration // the thread's CPU clock at begin
	hasCPU bool
	on     bool
	over   bool
}

// begin starts a budget of limit.
func (s *scriptBudget) begin(limit time.Duration) {
	runtime.LockOSThread()
	s.limit, s.spent, s.on, s.over = limit, 0, true, false
	s.cpu0, s.hasCPU = sandbox.ThreadCPU()
}

// end releases the thread; the budget is off until the next begin.
func (s *scriptBudget) end() {
	if s.on {
		runtime.UnlockOSThread()
		s.on = false
	}
}

// left reports whether work may go on: the budget is not spent.
func (s *scriptBudget) left() bool {
	if s.over {
		return false
	}
	if s.spent < s.limit {
		return true
	}
	if s.hasCPU {
		if cpu, ok := sandbox.ThreadCPU(); ok && cpu-s.cpu0 < s.limit {
			s.spent = cpu - s.cpu0 // the calls used no more than that: look again once the sum passes the limit
			return true
		}
	}
	s.over = true
	return false
}

// add counts a call's wall time.
func (s *scriptBudget) add(d time.Duration) { s.spent += d }

// exhausted reports whether the budget ran out (left returned false).
func (s *scriptBudget) exhausted() bool { return s.over }
