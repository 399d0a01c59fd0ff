package chaos

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/tools/internal/repo"
)

var (
	buildOnce sync.Once
	buildDir  string
	builtBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// serverBinary builds fila-server once per test binary.
func serverBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "fila-chaos-"); buildErr != nil {
			return
		}
		builtBin, buildErr = repo.BuildServer(context.Background(), buildDir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// startCluster starts n nodes for the test, stopped when it ends; their logs are printed when
// it fails.
func startCluster(t *testing.T, n int, args ...string) *Cluster {
	t.Helper()
	c, err := StartCluster(serverBinary(t), t.TempDir(), n, func(int) []string { return args })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("node %d's log:\n%s", n.ID, n.Log.tail(40))
			}
		}
	})
	return c
}

// kill -9 and restart of a single fila-server (fsync on, the default) under enqueue, consume
// and ack load: nothing acknowledged is lost, nothing acked is delivered again.
func TestKillRestartLosesNothing(t *testing.T) {
	c := startCluster(t, 1)
	res, err := Run(context.Background(), Config{
		Cluster: c, Nemesis: KillRestart{Cluster: c},
		Duration: 8 * time.Second, FaultEvery: 1500 * time.Millisecond, FaultHold: 400 * time.Millisecond,
		Workload: Workload{Producers: 2, Consumers: 2, Batch: 4},
	})
	r := res.Report
	t.Logf("%v", r.Figures)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("the history broke the queue's promises:\n%s", violations(r))
	}
	if r.Faults < 2 || r.Enqueued == 0 || r.Acked == 0 || !r.Drained {
		t.Fatalf("the run did too little to tell: %v", r.Figures)
	}
}

func violationsShort(r Report, n int) string {
	lines := strings.Split(violations(r), "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}
