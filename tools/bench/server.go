package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/filamq/fila/tools/internal/loopback"
	"github.com/filamq/fila/tools/internal/repo"
)

// server is the broker under test: started by the tool, or an address given with -addr.
type server struct {
	addr     string
	httpAddr string // serves /metrics, and /debug/pprof/ when pprof
	pprof    bool
	cmd      *exec.Cmd
	dir      string
	bin      string
	args     []string
}

// startServer starts bin (built from the working tree when "") on a temporary data directory;
// with pprof it serves /debug/pprof/ on pprofAddr (a free address when "").
func startServer(bin string, fsync, pprof bool, pprofAddr string) (*server, error) {
	dir, err := os.MkdirTemp("", "fila-bench-")
	if err != nil {
		return nil, err
	}
	if bin == "" {
		if bin, err = repo.BuildServer(context.Background(), dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	addr, err := loopback.FreeAddr()
	if err != nil {
		return nil, err
	}
	s := &server{addr: addr, dir: dir, bin: bin, args: []string{"--data-dir", dir + "/data", "--listen", addr,
		"--log-level", "warn", "--fsync=" + strconv.FormatBool(fsync)}}
	// The HTTP listener always runs: the backlog figure reads the engine's scratch metrics there.
	if s.httpAddr = pprofAddr; s.httpAddr == "" {
		if s.httpAddr, err = loopback.FreeAddr(); err != nil {
			return nil, err
		}
	}
	s.args = append(s.args, "--http-listen", s.httpAddr)
	if s.pprof = pprof; pprof {
		s.args = append(s.args, "--pprof")
	}
	if err := s.launch(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// launch starts the server process and waits until it accepts connections.
func (s *server) launch() error {
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Stderr = os.Stderr
	if err := s.cmd.Start(); err != nil {
		return err
	}
	addr := s.addr
	deadline := time.Now().Add(120 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fila-server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restart stops the server with SIGTERM and starts it again on the same data directory.
func (s *server) restart() error {
	s.terminate()
	return s.launch()
}

func (s *server) stop() {
	s.terminate()
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// terminate stops the server process (SIGTERM, then SIGKILL after 15 s).
func (s *server) terminate() {
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

// memory is where the server's memory is, beyond RSS: the anonymous and file-backed parts of its
// RSS (/proc/PID/smaps_rollup) and, from its /metrics when it serves them, the engine's scratch
// regions (reserved on disk, and in the page cache: memory the kernel can reclaim that RSS does
// not show).
type memory struct {
	rssAnon, rssFile        int64
	scratch, scratchCached  int64
	scratchResident, mapped int64
}

// scrape reads the server's /metrics series, a labelled one under its name with its labels as
// written (`fila_snapshot_seconds_sum{queue="q"}`); none when it does not answer, or answers
// anything but 200 (a busy server's 503 carries no series).
func (s *server) scrape() map[string]float64 {
	series := map[string]float64{}
	res, err := http.Get("http://" + s.httpAddr + "/metrics")
	if err != nil {
		return series
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return series
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if i := strings.LastIndexByte(sc.Text(), '}'); i >= 0 { // labels may hold spaces
			name, v, ok = sc.Text()[:i+1], strings.TrimSpace(sc.Text()[i+1:]), true
		}
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			series[name] = f
		}
	}
	return series
}

func (s *server) memory() memory {
	var m memory
	if s.cmd == nil {
		return m
	}
	if f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", s.cmd.Process.Pid)); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			name, rest, _ := strings.Cut(sc.Text(), ":")
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			switch name {
			case "Anonymous":
				m.rssAnon = kb << 10
			case "Rss":
				m.rssFile = kb << 10 // minus the anonymous part below
			}
		}
		f.Close()
		m.rssFile -= m.rssAnon
	}
	series := s.scrape()
	m.scratch, m.scratchCached = int64(series["fila_engine_scratch_bytes"]), int64(series["fila_engine_scratch_cached_bytes"])
	m.scratchResident, m.mapped = int64(series["fila_engine_scratch_resident_bytes"]), int64(series["fila_engine_mapped_bytes"])
	return m
}
