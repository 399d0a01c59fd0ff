package membudget

import (
	"math"
	"testing"
	"testing/fstest"
)

const (
	gib        = int64(1) << 30
	noGoLimit  = math.MaxInt64
	v1Unlimted = "9223372036854771712\n"
)

func files(kv ...string) fstest.MapFS {
	m := fstest.MapFS{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = &fstest.MapFile{Data: []byte(kv[i+1])}
	}
	return m
}

const meminfo16G = "MemTotal:       16777216 kB\nMemFree:         1000 kB\n"

// The default budget comes from the process's own cgroup (walking up to the root, the smallest
// limit), then GOMEMLIMIT, then the machine's memory; the smallest wins. Before, only the root
// cgroup's file was read, so a process in a limited child cgroup got half the machine.
func TestProcessMemory(t *testing.T) {
	for _, tc := range []struct {
		name       string
		root       fstest.MapFS
		goMemLimit int64
		want       int64
		source     string
	}{
		{"cgroup v2, the process's own limit", files(
			"proc/self/cgroup", "0::/fila.slice/server.scope\n",
			"proc/meminfo", meminfo16G,
			"sys/fs/cgroup/fila.slice/server.scope/memory.max", "2147483648\n",
			"sys/fs/cgroup/fila.slice/memory.max", "max\n",
		), noGoLimit, 2 * gib, "sys/fs/cgroup/fila.slice/server.scope/memory.max"},
		{"cgroup v2, a parent's limit is tighter", files(
			"proc/self/cgroup", "0::/a/b/c\n",
			"proc/meminfo", meminfo16G,
			"sys/fs/cgroup/a/b/c/memory.max", "max\n",
			"sys/fs/cgroup/a/b/memory.max", "3221225472\n",
			"sys/fs/cgroup/a/memory.max", "8589934592\n",
		), noGoLimit, 3 * gib, "sys/fs/cgroup/a/b/memory.max"},
		{"cgroup v2 namespace: the process's cgroup is the mount's root", files(
			"proc/self/cgroup", "0::/\n",
			"proc/meminfo", meminfo16G,
			"sys/fs/cgroup/memory.max", "1073741824\n",
		), noGoLimit, gib, "sys/fs/cgroup/memory.max"},
		{"cgroup v1 memory controller", files(
			"proc/self/cgroup", "9:name=systemd:/\n5:cpu,cpuacct:/\n4:memory:/process_api/abc\n0::/\n",
			"proc/meminfo", meminfo16G,
			"sys/fs/cgroup/memory/memory.limit_in_bytes", v1Unlimted,
			"sys/fs/cgroup/memory/process_api/memory.limit_in_bytes", v1Unlimted,
			"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes", "536870912\n",
		), noGoLimit, gib / 2, "sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes"},
		{"cgroup v1, memory beside another controller", files(
			"proc/self/cgroup", "3:cpuset,memory:/x\n",
			"proc/meminfo", meminfo16G,
			"sys/fs/cgroup/memory/x/memory.limit_in_bytes", "1073741824\n",
		), noGoLimit, gib, "sys/fs/cgroup/memory/x/memory.limit_in_bytes"},
		{"GOMEMLIMIT below the cgroup's", files(
			"proc/self/cgroup", "0::/a\n",
			"proc/meminfo", meminfo16G,
			"sys/fs/cgroup/a/memory.max", "2147483648\n",
		), gib, gib, "GOMEMLIMIT"},
		{"GOMEMLIMIT above the cgroup's", files(
			"proc/self/cgroup", "0::/a\n",
			"proc/meminfo", meminfo16G,
			"sys/fs/cgroup/a/memory.max", "2147483648\n",
		), 4 * gib, 2 * gib, "sys/fs/cgroup/a/memory.max"},
		{"no cgroup limit: GOMEMLIMIT", files(
			"proc/self/cgroup", "0::/a\n",
			"proc/meminfo", meminfo16G,
			"sys/fs/cgroup/a/memory.max", "max\n",
		), 3 * gib, 3 * gib, "GOMEMLIMIT"},
		{"no limit at all: the machine's memory", files(
			"proc/self/cgroup", "0::/a\n",
			"proc/meminfo", meminfo16G,
		), noGoLimit, 16 * gib, "proc/meminfo"},
		{"nothing readable", files(
			"proc/self/cgroup", "garbage\n4:memory\n",
			"sys/fs/cgroup/memory.max", "lots\n",
		), noGoLimit, fallbackMemory, "fallback"},
		{"a sibling cgroup's limit is not the process's", files(
			"proc/self/cgroup", "0::/a\n",
			"proc/meminfo", meminfo16G,
			"sys/fs/cgroup/b/memory.max", "1073741824\n",
		), noGoLimit, 16 * gib, "proc/meminfo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ProcessMemory(tc.root, tc.goMemLimit)
			if got.Bytes != tc.want || got.Source != tc.source {
				t.Fatalf("ProcessMemory = %d from %q, want %d from %q", got.Bytes, got.Source, tc.want, tc.source)
			}
		})
	}
}
