package sandbox_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/filamq/fila/lua/sandbox"
)

// The fuzz target's slack over a run's budgets. CPU: the budget's own allowance (1/8 of it, see
// sandbox.Thread) and 10 ms for what one step between two checks may cost (a GC assist, a 1 MiB
// copy). Memory, allocated during the run: MaxCallBytes charged, as much again for the builders'
// growth and the values a charged string is made from, and 16 MiB for what the VM allocates
// itself in the budget's time (tables: about 10 MiB in 10 ms) and the run's own bookkeeping.
const (
	fuzzCPUSlack    = 10 * time.Millisecond
	fuzzMemorySlack = 16 << 20
)

// FuzzScripts runs random programs of a small grammar (loops, string functions with patterns,
// .., table inserts, rep, format, concat, sort) in the sandbox: no run may panic in Go (gopher-lua
// turns a Go panic into a script error: "runtime error"), use more CPU than its budget plus
// fuzzCPUSlack, or allocate more than twice MaxCallBytes plus fuzzMemorySlack.
func FuzzScripts(f *testing.F) {
	for _, seed := range []string{
		"", "\x00", "\x06\x01\x02", "\x02\x09\x08\x01\x05", "\x03\x06\x00\x07", "\x02\xff\x01\x0a\x0b\x04\x05",
		"\x08\x03\x00\x01\x02\x03\x04\x05\x06\x07", "\x0c\x02\x08\x08\x08\x04\x00\x0a", "\x03\x01\x01\x01\x01\x01\x01",
	} {
		f.Add([]byte(seed))
	}
	lim := sandbox.DefaultLimits()
	f.Fuzz(func(t *testing.T, data []byte) {
		src := (&program{data: data}).generate()
		proto, err := sandbox.Compile("fuzz", src)
		if err != nil {
			return // a program the grammar made too long, for example
		}
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		s := sandbox.NewState(lim, nil)
		defer s.Close()
		fn := s.L.NewFunctionFromProto(proto)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		cpu0 := ThreadCPU(t)
		_, err = s.Run(lim.Timeout, fn, 0)
		cpu := ThreadCPU(t) - cpu0
		runtime.ReadMemStats(&after)
		if err != nil && !errors.Is(err, sandbox.ErrTimeout) && !errors.Is(err, sandbox.ErrScript) {
			t.Fatalf("%s\nan error of neither kind: %v", src, err)
		}
		if err != nil && (strings.Contains(err.Error(), "runtime error") || strings.Contains(err.Error(), "interface conversion")) {
			t.Fatalf("%s\na Go panic: %v", src, err)
		}
		if limit := lim.Timeout + lim.Timeout/8 + fuzzCPUSlack; cpu > limit {
			t.Fatalf("%s\nused %v of CPU, more than %v (%v)", src, cpu, limit, err)
		}
		if alloc, limit := after.TotalAlloc-before.TotalAlloc, uint64(2*lim.MaxCallBytes+fuzzMemorySlack); alloc > limit {
			t.Fatalf("%s\nallocated %d bytes, more than %d (%v)", src, alloc, limit, err)
		}
	})
}

// ThreadCPU is the calling thread's CPU time (the test holds its thread for the run).
func ThreadCPU(t *testing.T) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Skip("no thread CPU clock")
	}
	return time.Duration(ts.Nano())
}

// program generates a Lua program from fuzz data: each choice reads a byte (0 once the data is
// used up, which ends the program).
type program struct {
	data  []byte
	b     strings.Builder
	stmts int
}

func (p *program) pick(n int) int {
	if len(p.data) == 0 {
		return 0
	}
	c := int(p.data[0]) % n
	p.data = p.data[1:]
	return c
}

func (p *program) generate() string {
	p.b.WriteString("local v1, v2, v3, v4, t = \"a\", \"ab\", \"aaa\", \"(x)\", {}\n")
	for len(p.data) > 0 && p.stmts < 40 {
		p.stmt(0)
	}
	return p.b.String()
}

func (p *program) v() string { return fmt.Sprintf("v%d", 1+p.pick(4)) }

func (p *program) num() string {
	return []string{"0", "1", "2", "3", "10", "100", "1000", "65535", "2^20", "2^24", "1e9", "-1"}[p.pick(12)]
}

func (p *program) stmt(depth int) {
	p.stmts++
	w := func(format string, args ...any) { fmt.Fprintf(&p.b, format, args...) }
	kinds := 14
	if depth >= 3 {
		kinds = 10 // no more nesting
	}
	switch p.pick(kinds) {
	case 0:
		w("%s = %s\n", p.v(), p.expr())
	case 1:
		w("table.insert(t, %s)\n", p.expr())
	case 2:
		w("%s = table.concat(t, %q)\n", p.v(), []string{"", ",", "--"}[p.pick(3)])
	case 3:
		w("local _ = string.find(%s, %q)\n", p.v(), p.pattern())
	case 4:
		w("%s = (string.gsub(%s, %q, %s))\n", p.v(), p.v(), p.pattern(), p.repl())
	case 5:
		w("%s = string.format(%q, %s, %s)\n", p.v(), []string{"%s", "%5.2f|%s", "%99s%99s", "%q", "%-10s|%s", "%d %s"}[p.pick(6)], p.v(), p.v())
	case 6:
		w("pcall(table.sort, t)\n")
	case 7:
		w("t = {}\n")
	case 8:
		w("%s = string.rep(%s, %s)\n", p.v(), p.v(), p.num())
	case 9:
		w("%s = %s .. %s .. %s\n", p.v(), p.v(), p.expr(), p.v())
	case 10:
		w("for i = 1, %s do\n", p.num())
		p.stmt(depth + 1)
		p.stmt(depth + 1)
		w("end\n")
	case 11:
		w("for m in string.gmatch(%s, %q) do\n", p.v(), p.pattern())
		p.stmt(depth + 1)
		w("end\n")
	case 12:
		w("pcall(function()\n")
		p.stmt(depth + 1)
		p.stmt(depth + 1)
		w("end)\n")
	case 13:
		w("while true do\n")
		p.stmt(depth + 1)
		w("end\n")
	}
}

func (p *program) expr() string {
	switch p.pick(10) {
	case 0:
		return p.v()
	case 1:
		return fmt.Sprintf("%q", []string{"", "x", "abc", "a.b.c", "%", "((a))", "aaaaaaaaab"}[p.pick(7)])
	case 2:
		return fmt.Sprintf("(%s .. %s)", p.v(), p.v())
	case 3:
		return fmt.Sprintf("string.rep(%s, %s)", p.v(), p.num())
	case 4:
		return fmt.Sprintf("%s:%s()", p.v(), []string{"upper", "lower", "reverse"}[p.pick(3)])
	case 5:
		return fmt.Sprintf("%s:sub(%s, %s)", p.v(), p.num(), p.num())
	case 6:
		return fmt.Sprintf("tostring(%s)", p.num())
	case 7:
		return fmt.Sprintf("(string.match(%s, %q) or \"\")", p.v(), p.pattern())
	case 8:
		return fmt.Sprintf("tostring(#t)")
	}
	return fmt.Sprintf("(%s):rep(2)", p.v())
}

func (p *program) repl() string {
	return []string{`"%0%0"`, `"%1"`, `"x"`, `{a = "b"}`, `function(s) return s .. s end`, `"%%"`}[p.pick(6)]
}

// pattern is a few items of Lua's patterns, with suffixes, captures and the backtracking kind.
func (p *program) pattern() string {
	var b strings.Builder
	if p.pick(6) == 0 {
		b.WriteByte('^')
	}
	open := 0
	for range 1 + p.pick(8) {
		switch k := p.pick(16); {
		case k == 0 && open < 3:
			b.WriteByte('(')
			open++
		case k == 1 && open > 0:
			b.WriteString(".)")
			open--
		case k == 2:
			b.WriteString("%b()")
		case k == 3:
			b.WriteString("%f[%w]")
		case k == 4:
			b.WriteString("a*a*a*a*a*")
		default:
			b.WriteString([]string{"a", "b", ".", "%a", "%d", "%s", "[ab]", "[^a]", "%(", "x"}[p.pick(10)])
			b.WriteString([]string{"", "*", "+", "-", "?"}[p.pick(5)])
		}
	}
	for ; open > 0; open-- {
		b.WriteString(".)")
	}
	if p.pick(6) == 0 {
		b.WriteByte('$')
	}
	return b.String()
}
