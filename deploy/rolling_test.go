package deploy

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// make cluster's script runs three nodes, and make rolling-restart's drains, restarts and
// undrains each in turn; the messages stored before are all delivered after. (The same
// procedure under load, judged by the history checker: tools/chaos TestRollingRestartLosesNothing.)
func TestRollingRestartScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs three nodes")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./server/cmd/fila-server", "./client/cmd/fila")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	off := freePortOffset(t)
	dir := t.TempDir()
	env := append(os.Environ(), "FILA_SERVER="+filepath.Join(bin, "fila-server"), "FILA="+filepath.Join(bin, "fila"),
		"CLUSTER_DIR="+dir, fmt.Sprint("CLUSTER_PORT_OFFSET=", off))
	cluster := exec.Command("bash", "cluster.sh")
	cluster.Env = env
	var out bytes.Buffer
	cluster.Stdout, cluster.Stderr = &out, &out
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cluster.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cluster.Wait() }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			cluster.Process.Kill()
			t.Errorf("make cluster's script did not stop within a minute of SIGTERM")
		}
		if t.Failed() {
			t.Logf("cluster.sh:\n%s", out.String())
			for i := 1; i <= 3; i++ {
				if b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.log", i))); err == nil {
					t.Logf("node %d's log:\n%s", i, tail(string(b), 30))
				}
			}
		}
	})
	seeds := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", 5561+off, 5562+off, 5563+off)
	fila := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "fila"), append([]string{"--addr", seeds}, args...)...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := fila("queue", "create", "rolled")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not take a queue within a minute: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	const n = 10
	for i := range n {
		if o, err := fila("enqueue", "rolled", fmt.Sprint("m", i)); err != nil {
			t.Fatalf("enqueue: %v\n%s", err, o)
		}
	}
	roll := exec.Command("bash", "rolling-restart.sh")
	roll.Env = env
	if o, err := roll.CombinedOutput(); err != nil || !strings.Contains(string(o), "all three nodes restarted") {
		t.Fatalf("rolling-restart.sh: %v\n%s", err, o)
	}
	if s := out.String(); strings.Count(s, "for a restart: starting it again") != 3 {
		t.Fatalf("make cluster's script did not restart the three nodes:\n%s", s)
	}
	o, err := fila("--json", "consume", "rolled", "--count", fmt.Sprint(n), "--ack", "--wait", "30s")
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, o)
	}
	for i := range n {
		if !strings.Contains(o, fmt.Sprintf("m%d", i)) {
			t.Fatalf("m%d was not delivered after the rolling restart:\n%s", i, o)
		}
	}
}

// freePortOffset finds an offset at which the nine ports make cluster's script uses are free.
func freePortOffset(t *testing.T) int {
	t.Helper()
	for off := 1000 + os.Getpid()%500*10; off < 20000; off += 37 {
		free := true
		for _, base := range []int{5560, 7000, 9560} {
			for i := 1; i <= 3 && free; i++ {
				l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+off+i))
				if err != nil {
					free = false
					break
				}
				l.Close()
			}
		}
		if free {
			return off
		}
	}
	t.Fatal("no free ports for make cluster's nodes")
	return 0
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
