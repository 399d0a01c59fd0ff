package membudget

import (
	"bufio"
	"io/fs"
	"math"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// fallbackMemory is assumed when no limit and not the machine's memory can be read.
const fallbackMemory = 4 << 30

// defaultShare is the part of the process's memory that clients may make it hold by default; the
// rest is left to queues, caches and storage.
const defaultShare = 2

// unlimited is the least value read as "no limit": cgroup v1 writes an unset limit as the
// largest page-aligned int64 (9223372036854771712).
const unlimited = 1 << 60

// Where cgroup hierarchies are mounted, relative to the file system root: cgroup v2's unified
// one, and cgroup v1's memory controller.
const (
	cgroupV2Mount = "sys/fs/cgroup"
	cgroupV1Mount = "sys/fs/cgroup/memory"
)

// DefaultLimit is the default server-wide budget: half the memory the process may use.
func DefaultLimit() int64 { return Default().Bytes }

// Default is the default server-wide budget, half the memory the process may use, with where
// that memory figure was read.
func Default() Memory {
	m := ProcessMemory(os.DirFS("/"), debug.SetMemoryLimit(-1))
	m.Bytes /= defaultShare
	return m
}

// Available returns the memory the process may use, in bytes (ProcessMemory of this process).
func Available() int64 { return ProcessMemory(os.DirFS("/"), debug.SetMemoryLimit(-1)).Bytes }

// Memory is what the process may use, and where that figure was read.
type Memory struct {
	Bytes  int64
	Source string // a file under root, "GOMEMLIMIT", or "fallback"
}

// Cgroup reports whether the figure is a cgroup's limit.
func (m Memory) Cgroup() bool { return strings.HasPrefix(m.Source, cgroupV2Mount+"/") }

// ProcessMemory returns the memory a process may use: the smallest of its own cgroup's memory
// limit, goMemLimit (GOMEMLIMIT as debug.SetMemoryLimit(-1) reports it: math.MaxInt64 when unset)
// and the machine's memory (MemTotal), or fallbackMemory when none of them can be read. root is
// the file system root (os.DirFS("/"); tests give a fake one).
//
// The process's cgroup is read from proc/self/cgroup: for cgroup v2 (the "0::PATH" line) the
// limit is the smallest memory.max from sys/fs/cgroup/PATH up to the hierarchy's root (a parent's
// limit bounds its children); for cgroup v1 (the line whose controllers include memory), the
// smallest memory.limit_in_bytes from sys/fs/cgroup/memory/PATH up. A path that is not there (the
// hierarchy mounted elsewhere) adds no limit.
func ProcessMemory(root fs.FS, goMemLimit int64) Memory {
	m := Memory{Bytes: math.MaxInt64, Source: "fallback"}
	take := func(n int64, source string) {
		if n > 0 && n < unlimited && n < m.Bytes {
			m = Memory{Bytes: n, Source: source}
		}
	}
	take(machineMemory(root), "proc/meminfo")
	take(goMemLimit, "GOMEMLIMIT")
	for _, c := range ownCgroups(root) {
		mount, file := cgroupV1Mount, "memory.limit_in_bytes"
		if c.v2 {
			mount, file = cgroupV2Mount, "memory.max"
		}
		for dir := path.Clean("/" + c.path); ; dir = path.Dir(dir) {
			p := path.Join(mount, dir, file)
			take(readLimit(root, p), p)
			if dir == "/" {
				break
			}
		}
	}
	if m.Bytes == math.MaxInt64 {
		m.Bytes = fallbackMemory
	}
	return m
}

// cgroup is one hierarchy the process belongs to, with its path inside it.
type cgroup struct {
	v2   bool
	path string
}

// ownCgroups reads the cgroup v2 line and the cgroup v1 memory line of proc/self/cgroup
// ("ID:CONTROLLERS:PATH", controllers empty for v2).
func ownCgroups(root fs.FS) []cgroup {
	f, err := root.Open("proc/self/cgroup")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []cgroup
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		controllers, p, ok2 := strings.Cut(rest, ":")
		if !ok || !ok2 || !strings.HasPrefix(p, "/") {
			continue
		}
		switch {
		case id == "0" && controllers == "":
			out = append(out, cgroup{v2: true, path: p})
		case hasController(controllers, "memory"):
			out = append(out, cgroup{path: p})
		}
	}
	return out
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit reads a cgroup limit file: a number of bytes, or "max" (0: none, or no such file).
func readLimit(root fs.FS, p string) int64 {
	b, err := fs.ReadFile(root, p)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// machineMemory reads MemTotal from proc/meminfo (0 when it cannot).
func machineMemory(root fs.FS) int64 {
	f, err := root.Open("proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kb > math.MaxInt64>>10 {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
