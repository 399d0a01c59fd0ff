// Package procfs reads what Linux's /proc says about a process.
package procfs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPU is the user and system CPU time pid has used, from /proc (0 where it cannot be read).
func CPU(pid int) time.Duration {
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
