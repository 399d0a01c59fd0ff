package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// writeResults writes results.md (settings, versions, machine and the table), compare.txt (the
// COMPARE, CPU, FLOOR and GAP lines) and compare.png (the bar chart) into the results folder.
func writeResults(e *env, root string, figs []figure, floors []floor, took time.Duration) error {
	var lines strings.Builder
	for _, f := range figs {
		lines.WriteString(f.compareLine() + "\n")
	}
	for _, l := range e.cpuLines {
		lines.WriteString(l + "\n")
	}
	for _, f := range floors {
		lines.WriteString(f.line() + "\n")
	}
	for _, l := range gapLines(figs, floors) {
		lines.WriteString(l + "\n")
	}
	for _, l := range summaryLines(figs) {
		lines.WriteString(l + "\n")
	}
	if err := os.WriteFile(filepath.Join(e.o.out, "compare.txt"), []byte(lines.String()), 0o644); err != nil {
		return err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# fila vs NATS, %s\n\n", time.Now().Format(time.RFC3339))
	for _, kv := range e.metadata(root, took) {
		fmt.Fprintf(&md, "- %s: %s\n", kv[0], kv[1])
	}
	if e.riftReason != "" {
		fmt.Fprintf(&md, "- Rift: Fila's side n/a: %s\n", e.riftReason)
	}
	md.WriteString("\n" + markdownTable(figs))
	md.WriteString("\nFloors, measured in the same run (what no broker on this machine can go below):\n\n" + floorsTable(floors))
	md.WriteString("\n```\n" + lines.String() + "```\n\n![chart](compare.png)\n")
	if err := os.WriteFile(filepath.Join(e.o.out, "results.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	return writeChart(filepath.Join(e.o.out, "compare.png"), figs)
}

// metadata lists what a reader needs to reproduce or weigh the figures.
func (e *env) metadata(root string, took time.Duration) [][2]string {
	cpu, kernel := hostInfo()
	mode := "normal"
	if e.o.quick {
		mode = "quick (figures are rough)"
	}

	natsVersion := natsServerVersion
	if out, err := exec.Command(e.natsBin, "--version").Output(); err == nil {
		natsVersion = strings.TrimPrefix(strings.TrimSpace(string(out)), "nats-server: ")
	}
	runs := "1 per workload"
	if e.o.repeat > 1 {
		runs = fmt.Sprintf("%d per workload, brokers alternating; figures are medians, with the runs' range in parentheses", e.o.repeat)
	}
	return [][2]string{
		{"mode", fmt.Sprintf("%s: %v warm-up + %v measured per throughput figure and broker, %d latency samples after %d warm-up, lifecycle pre-fill %d",
			mode, e.o.warmup, e.o.duration, e.o.latencySamples, e.o.latencyWarmup, e.o.prefill)},
		{"runs", runs},
		{"machine", fmt.Sprintf("%d CPUs (%s), Linux %s; load generator and broker share them", runtime.NumCPU(), cpu, kernel)},
		{"fila-server", "built from " + gitDescribe(root) + " with " + runtime.Version()},
		{"nats-server", natsVersion},
		{"nats.go", moduleVersion("github.com/nats-io/nats.go")},
		{"took", took.Round(time.Second).String()},
		{"load average", fmt.Sprintf("%s at the start, %s at the end (1, 5, 15 min; other work on the machine adds noise)", e.loadStart, loadAverage())},
	}
}

// gitDescribe names the repository's commit, marked dirty when the tree has changes.
func gitDescribe(root string) string {
	if root == "" {
		return "an unknown tree"
	}
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return root
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain").Output(); err == nil && len(st) > 0 {
		rev += " (with uncommitted changes)"
	}
	return "commit " + rev
}

// moduleVersion is the version of a module compiled into this tool.
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// hostInfo describes the processor and kernel.
func hostInfo() (cpu, kernel string) {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return cpu, kernel
}
