package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// server is the broker under test: started by the tool, or an address given with -addr.
type server struct {
	addr string
	cmd  *exec.Cmd
	dir  string
}

func startServer(fsync bool) (*server, error) {
	dir, err := os.MkdirTemp("", "fila-bench-")
	if err != nil {
		return nil, err
	}
	bin, err := buildServer(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--data-dir", dir+"/data", "--listen", addr, "--http-listen", "", "--log-level", "warn",
		"--fsync="+strconv.FormatBool(fsync))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{addr: addr, cmd: cmd, dir: dir}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("fila-server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) stop() {
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			s.cmd.Process.Kill()
			<-done
		}
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// rssBytes reads the server's resident set size from /proc; 0 when the server is not ours.
func (s *server) rssBytes() int64 {
	if s.cmd == nil {
		return 0
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
