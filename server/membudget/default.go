package membudget

import (
	"bufio"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// fallbackMemory is assumed when neither GOMEMLIMIT nor the machine's memory can be read.
const fallbackMemory = 4 << 30

// defaultShare is the part of the process's memory that clients may make it hold by default; the
// rest is left to queues, caches and storage.
const defaultShare = 2

// DefaultLimit is the default server-wide budget: half the memory the process may use.
func DefaultLimit() int64 { return Available() / defaultShare }

// Available returns the memory the process may use, in bytes.
func Available() int64 {
	if lim := debug.SetMemoryLimit(-1); lim > 0 && lim < math.MaxInt64 {
		return lim
	}
	m := machineMemory()
	if c := cgroupLimit(); c > 0 && (m == 0 || c < m) {
		m = c
	}
	if m <= 0 {
		return fallbackMemory
	}
	return m
}

// machineMemory reads MemTotal from /proc/meminfo (0 when it cannot).
func machineMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// cgroupLimit reads a cgroup v2 or v1 memory limit (0 when there is none).
func cgroupLimit() int64 {
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err == nil && v > 0 && v < 1<<60 {
			return v
		}
	}
	return 0
}
