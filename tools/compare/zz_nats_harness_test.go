package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Temporary (not committed): syscalls and context switches per NATS request/reply.
func TestZZNATSReqReplyCounts(t *testing.T) {
	bin := os.Getenv("NATS_BIN")
	if bin == "" {
		t.Skip()
	}
	srv := exec.Command(bin, "-a", "127.0.0.1", "-p", "14999")
	srv.Start()
	defer srv.Process.Kill()
	time.Sleep(500 * time.Millisecond)
	rc, err := nats.Connect("nats://127.0.0.1:14999")
	if err != nil {
		t.Fatal(err)
	}
	rc.Subscribe("service", func(m *nats.Msg) { m.Respond(m.Data) })
	rc.Flush()
	qc, _ := nats.Connect("nats://127.0.0.1:14999")
	payload := make([]byte, 1024)
	for i := 0; i < 500; i++ {
		qc.Request("service", payload, 5*time.Second)
	}
	const ev = "syscalls:sys_enter_sendmsg,syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep,context-switches"
	perf := func(pid int) (*exec.Cmd, *strings.Builder) {
		var b strings.Builder
		c := exec.Command("perf", "stat", "-x,", "-e", ev, "-p", strconv.Itoa(pid), "--", "sleep", "3")
		c.Stderr = &b
		c.Start()
		return c, &b
	}
	ps, sb := perf(srv.Process.Pid)
	pc, cb := perf(os.Getpid())
	c0, s0 := selfCPU(), procCPU(srv.Process.Pid)
	n := 0
	var lat []time.Duration
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		st := time.Now()
		if _, err := qc.Request("service", payload, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(st))
		n++
	}
	c1, s1 := selfCPU(), procCPU(srv.Process.Pid)
	ps.Wait()
	pc.Wait()
	show := func(name, out string) {
		var parts []string
		for _, l := range strings.Split(out, "\n") {
			f := strings.Split(l, ",")
			if len(f) < 3 {
				continue
			}
			v, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s=%.2f", strings.TrimPrefix(f[2], "syscalls:sys_enter_"), v/float64(n)))
		}
		fmt.Println(name, strings.Join(parts, " "))
	}
	show("nats-server/req:", sb.String())
	show("client/req:", cb.String())
	b, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("n=%d srvcpu=%.1fus clicpu=%.1fus load=%s", n, float64(s1-s0)/1e3/float64(n), float64(c1-c0)/1e3/float64(n), b)
}
