package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/filamq/fila/tools/internal/procfs"
)

// cpuUnit is the unit of CPU time per message: µs.
const cpuUnit = "us/msg"

// cpuUse is the CPU time the broker under measurement (a cluster's three nodes together) and this tool (the load generator and the
// client libraries) spent while a figure was measured, per message or exchange counted: what the
// throughput of a 2-core machine shared by both is bound by.
type cpuUse struct {
	broker, tool float64 // µs per unit
	// nodes is a cluster's broker figure by node, the busiest first: its leader's share is what
	// one node would spend were each on a machine of its own (nil for a single process).
	nodes []float64
}

// cpuMeter reads both CPU times at the start of a measurement.
type cpuMeter struct {
	pids         []int // the broker's processes: one, or a cluster's nodes
	broker, tool time.Duration
	each         []time.Duration // by pid
}

func (e *env) startCPU() cpuMeter {
	m := cpuMeter{pids: e.brokerPids, tool: selfCPU()}
	for _, pid := range e.brokerPids {
		d := procCPU(pid)
		m.each = append(m.each, d)
		m.broker += d
	}
	return m
}

// pidsCPU is the CPU time the processes have used together.
func pidsCPU(pids []int) time.Duration {
	var d time.Duration
	for _, pid := range pids {
		d += procCPU(pid)
	}
	return d
}

// stopCPU records the CPU spent since m per one of n units as the figure's.
func (e *env) stopCPU(m cpuMeter, n int64) {
	if n <= 0 || len(m.pids) == 0 {
		return
	}
	e.cpu = &cpuUse{
		broker: float64(pidsCPU(m.pids)-m.broker) / 1e3 / float64(n),
		tool:   float64(selfCPU()-m.tool) / 1e3 / float64(n),
	}
	if len(m.pids) > 1 {
		for i, pid := range m.pids {
			e.cpu.nodes = append(e.cpu.nodes, float64(procCPU(pid)-m.each[i])/1e3/float64(n))
		}
		slices.SortFunc(e.cpu.nodes, func(a, b float64) int { return cmp.Compare(b, a) })
	}
}

// nodesText is the figure by node, the busiest first, joined by sep ("" for a single process).
func (c *cpuUse) nodesText(sep string) string {
	parts := make([]string, len(c.nodes))
	for i, v := range c.nodes {
		parts[i] = fmt.Sprintf("%.2f", v)
	}
	return strings.Join(parts, sep)
}

// line is the CPU summary line of one side of a workload's run, in compare.txt:
//
//	CPU workload=rift_pubsub_1kb broker=fila broker_us=4.8 tool_us=4.8 unit=us/msg
//	CPU workload=cluster_publish_1kb_fsync broker=fila broker_us=10.9 tool_us=2.1 unit=us/msg nodes_us=5.10/2.90/2.90
func (c *cpuUse) line(workload, broker string) string {
	l := fmt.Sprintf("CPU workload=%s broker=%s broker_us=%.2f tool_us=%.2f unit=%s", workload, broker, c.broker, c.tool, cpuUnit)
	if len(c.nodes) > 0 {
		l += " nodes_us=" + c.nodesText("/")
	}
	return l
}

func (c *cpuUse) String() string {
	s := fmt.Sprintf("CPU %.1f µs in the broker and %.1f µs in this tool per message or exchange", c.broker, c.tool)
	if len(c.nodes) > 0 {
		s += " (by node, busiest first: " + c.nodesText(" + ") + ")"
	}
	return s
}

// procCPU is the user and system CPU time pid has used (0 where it cannot be read).
var procCPU = procfs.CPU

// selfCPU is the user and system CPU time this process has used.
func selfCPU() time.Duration {
	var r syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &r) != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
