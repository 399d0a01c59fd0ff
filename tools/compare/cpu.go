package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuUnit is the unit of CPU time per message: µs.
const cpuUnit = "us/msg"

// cpuUse is the CPU time the broker under measurement and this tool (the load generator and the
// client libraries) spent while a figure was measured, per message or exchange counted: what the
// throughput of a 2-core machine shared by both is bound by.
type cpuUse struct {
	broker, tool float64 // µs per unit
}

// cpuMeter reads both CPU times at the start of a measurement.
type cpuMeter struct {
	pid          int
	broker, tool time.Duration
}

func (e *env) startCPU() cpuMeter {
	return cpuMeter{pid: e.brokerPid, broker: procCPU(e.brokerPid), tool: selfCPU()}
}

// stopCPU records the CPU spent since m per one of n units as the figure's.
func (e *env) stopCPU(m cpuMeter, n int64) {
	if n <= 0 || m.pid == 0 {
		return
	}
	e.cpu = &cpuUse{
		broker: float64(procCPU(m.pid)-m.broker) / 1e3 / float64(n),
		tool:   float64(selfCPU()-m.tool) / 1e3 / float64(n),
	}
}

// line is the CPU summary line of one side of a workload's run, in compare.txt:
//
//	CPU workload=rift_pubsub_1kb broker=fila broker_us=4.8 tool_us=4.8 unit=us/msg
func (c *cpuUse) line(workload, broker string) string {
	return fmt.Sprintf("CPU workload=%s broker=%s broker_us=%.2f tool_us=%.2f unit=%s", workload, broker, c.broker, c.tool, cpuUnit)
}

func (c *cpuUse) String() string {
	return fmt.Sprintf("CPU %.1f µs in the broker and %.1f µs in this tool per message or exchange", c.broker, c.tool)
}

// procCPU is the user and system CPU time pid has used, from /proc (0 where it cannot be read).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which is in parentheses and may hold spaces): utime
	// and stime are the 12th and 13th, in clock ticks (100 per second on Linux).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// selfCPU is the user and system CPU time this process has used.
func selfCPU() time.Duration {
	var r syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &r) != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
