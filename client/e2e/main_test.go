package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/client/internal/repobuild"
	"github.com/filamq/fila/client/internal/serverproc"
	"github.com/filamq/fila/generated/fibp"
)

// The binaries TestMain builds, and the broker the shared-server tests talk to.
var (
	serverBin  string // fila-server
	cliBin     string // fila
	sharedAddr string // the shared broker: started by TestMain, or FILA_TEST_ADDR
	apiKey     string // FILA_TEST_API_KEY, for an external broker
	runTag     string // makes queue names unique across runs against an external broker
)

// waitFor bounds every wait for the broker to act asynchronously; it is a safety net against a
// hang, never the subject of an assertion.
const waitFor = 15 * time.Second

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "fila-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if err := buildBinaries(tmp); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	runTag = fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
	apiKey = os.Getenv("FILA_TEST_API_KEY")
	var srv *server
	if sharedAddr = os.Getenv("FILA_TEST_ADDR"); sharedAddr == "" {
		srv, err = startServer(filepath.Join(tmp, "shared-data"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: starting the shared fila-server:", err)
			return 1
		}
		sharedAddr = srv.addr
	}
	code := m.Run()
	if srv != nil {
		if err := srv.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping the shared fila-server:", err)
			code = 1
		}
		if code != 0 {
			fmt.Fprintf(os.Stderr, "--- shared fila-server log:\n%s", srv.proc.Log.String())
		}
	}
	return code
}

// trackCLISources stats the CLI's source files, once, from the first test that runs the CLI.
// The go command caches a test's result keyed by the test binary and the files the test process
// consults while tests run (not in TestMain before m.Run), counting only files inside the test's
// own module; the subprocesses' builds are invisible to it. This makes a CLI change rerun the
// suite. A server change (another module) does not: use `go test -count=1 ./e2e/` after one.
var trackCLISources = sync.OnceValue(func() error {
	root, err := repobuild.Root()
	if err != nil {
		return err
	}
	return filepath.WalkDir(filepath.Join(root, "client", "cmd"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			_, err = os.Stat(path)
		}
		return err
	})
})

// buildBinaries builds fila-server and the fila CLI into dir, concurrently.
func buildBinaries(dir string) error {
	serverBin, cliBin = filepath.Join(dir, "fila-server"), filepath.Join(dir, "fila")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, b := range []struct{ out, pkg string }{{serverBin, "./server/cmd/fila-server"}, {cliBin, "./client/cmd/fila"}} {
		wg.Go(func() { errs[i] = repobuild.Build(b.out, b.pkg) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// anyPort is the listen address of every test server: the system chooses a free port, and the
// server reports it (--addr-file). Choosing one here by listening and closing would race with
// parallel tests for it.
const anyPort = "127.0.0.1:0"

// server is a fila-server on one data directory; proc is its current process. addr and riftAddr
// are the addresses it reported bound on its first start; a restart binds them again.
type server struct {
	addr, riftAddr string
	httpAddr       string // with --http-listen
	dataDir        string
	args           []string // extra command-line settings
	proc           *serverproc.Process
}

// startServer starts fila-server on any free port (and its Rift listener, when args configure
// one, where they say) and returns once it reported itself ready.
func startServer(dataDir string, args ...string) (*server, error) {
	p, a, err := serverproc.Start(serverBin, dataDir, anyPort, waitFor, args...)
	if err != nil {
		return nil, err
	}
	return &server{addr: a.FIBP, riftAddr: a.Rift, httpAddr: a.HTTP, dataDir: dataDir, args: args, proc: p}, nil
}

// closedAddr returns a loopback address where nothing listens: a port the system handed out
// and took back. No server of these tests binds it later (they all bind port 0 and are given
// another), so it stays closed unless something outside the tests takes it.
func closedAddr() (string, error) {
	ln, err := net.Listen("tcp", anyPort)
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// running reports whether the current process has not exited.
func (s *server) running() bool { return s.proc.Running() }

// stop sends SIGTERM and waits for the process; it reports an unclean exit.
func (s *server) stop() error { return s.proc.Stop(30 * time.Second) }

// privateServer starts a broker of the test's own, for tests that change broker-wide state or
// need settings of their own (args).
func privateServer(t *testing.T, args ...string) *server {
	t.Helper()
	s, err := startServer(t.TempDir(), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.running() {
			if err := s.stop(); err != nil {
				t.Errorf("stopping the private fila-server: %v", err)
			}
		}
		if t.Failed() {
			t.Logf("private fila-server log:\n%s", s.proc.Log.String())
		}
	})
	return s
}

// restart stops s with SIGTERM (it must exit cleanly) and starts it again on the same data
// directory and address.
func (s *server) restart(t *testing.T) {
	t.Helper()
	if err := s.stop(); err != nil {
		t.Fatalf("%v\n%s", err, s.proc.Log.String())
	}
	if err := s.startAgain(); err != nil {
		t.Fatal(err)
	}
}

// startAgain starts a new process on s's data directory and on the addresses its first start
// was given (the clients' reconnections find it there).
func (s *server) startAgain() error {
	args := s.args
	if s.riftAddr != "" {
		args = append(slices.Clip(args), "--rift-listen", s.riftAddr)
	}
	p, _, err := serverproc.Start(serverBin, s.dataDir, s.addr, waitFor, args...)
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// --- SDK helpers ---

// testCtx bounds a test's requests; it ends with the test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// dial connects to addr (the shared broker when empty) and closes the client with the test.
func dial(t *testing.T, addr string) *fila.Client {
	t.Helper()
	key := ""
	if addr == "" {
		addr, key = sharedAddr, apiKey
	}
	c, err := fila.Dial(testCtx(t), addr, &fila.Options{APIKey: key})
	if err != nil {
		t.Fatalf("Dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var (
	queueSeq   atomic.Int64
	unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)
)

// queueName returns a queue name unique to this test, run and call.
func queueName(t *testing.T) string {
	base := strings.ToLower(unsafeName.ReplaceAllString(strings.TrimPrefix(t.Name(), "Test"), "-"))
	if len(base) > 60 {
		base = base[:60]
	}
	return fmt.Sprintf("e2e-%s-%s-%d", base, runTag, queueSeq.Add(1))
}

// createQueue creates a queue named after the test (cfg.Name, if empty) and deletes it with the
// test. It returns the name.
func createQueue(t *testing.T, c *fila.Client, cfg fila.QueueConfig) string {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = queueName(t)
	}
	id, err := c.CreateQueue(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("CreateQueue %q: %v", cfg.Name, err)
	}
	if id == "" {
		t.Errorf("CreateQueue %q returned an empty queue ID", cfg.Name)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.DeleteQueue(ctx, cfg.Name) // best effort: the test may have deleted it, or closed c
	})
	return cfg.Name
}

// fastQueue is a queue configuration with a short lease and immediate retries.
func fastQueue(visibility time.Duration, maxAttempts uint32) fila.QueueConfig {
	return fila.QueueConfig{VisibilityTimeout: visibility, MaxAttempts: maxAttempts, Backoff: fibp.BackoffNone}
}

// enqueue enqueues msgs in one frame and fails the test on any error.
func enqueue(t *testing.T, c *fila.Client, msgs ...fila.Message) []fila.MessageID {
	t.Helper()
	res, err := c.Enqueue(testCtx(t), msgs...)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	ids := make([]fila.MessageID, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("Enqueue item %d: %v", i, r.Err)
		}
		ids[i] = r.ID
	}
	return ids
}

// payloads makes n messages for queue with payloads prefix-0 .. prefix-(n-1).
func payloads(queue, prefix string, n int) []fila.Message {
	msgs := make([]fila.Message, n)
	for i := range msgs {
		msgs[i] = fila.Message{Queue: queue, Payload: fmt.Appendf(nil, "%s-%d", prefix, i)}
	}
	return msgs
}

func getStats(t *testing.T, c *fila.Client, queue string) *fila.QueueStats {
	t.Helper()
	st, err := c.GetStats(testCtx(t), queue)
	if err != nil {
		t.Fatalf("GetStats %q: %v", queue, err)
	}
	return st
}

// waitStats polls GetStats until cond holds, and returns the stats that satisfied it.
func waitStats(t *testing.T, c *fila.Client, queue, what string, cond func(*fila.QueueStats) bool) *fila.QueueStats {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		st := getStats(t, c, queue)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %q never reached %s; last stats %+v", queue, what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// eventually polls cond until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func consume(t *testing.T, c *fila.Client, queue string, opts fila.ConsumeOptions) *fila.Consumer {
	t.Helper()
	cons, err := c.Consume(testCtx(t), queue, opts)
	if err != nil {
		t.Fatalf("Consume %q: %v", queue, err)
	}
	t.Cleanup(func() { cons.Close() })
	return cons
}

// next waits for the next delivery.
func next(t *testing.T, cons *fila.Consumer) *fila.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	d, err := cons.Next(ctx)
	if err != nil {
		t.Fatalf("Next on %q: %v", cons.Queue(), err)
	}
	return d
}

func ack(t *testing.T, d *fila.Delivery) {
	t.Helper()
	if err := d.Ack(testCtx(t)); err != nil {
		t.Fatalf("Ack %v: %v", d.ID, err)
	}
}

// wantCode fails the test unless err carries the broker error code of want.
func wantCode(t *testing.T, what string, err error, want *fila.Error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want %v", what, err, want.Code)
	}
}

// --- CLI helpers ---

type cliResult struct {
	stdout, stderr string
	code           int
}

// cli runs the fila binary against addr (the shared broker when empty).
func cli(t *testing.T, addr string, args ...string) cliResult {
	t.Helper()
	if err := trackCLISources(); err != nil {
		t.Fatal(err)
	}
	key := ""
	if addr == "" {
		addr, key = sharedAddr, apiKey
	}
	full := []string{"--addr", addr, "--timeout", "10s"}
	if key != "" {
		full = append(full, "--api-key", key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBin, append(full, args...)...)
	cmd.Env = serverproc.CleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Stdin = strings.NewReader("")
	err := cmd.Run()
	r := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("fila %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// cliOK runs the CLI and fails the test unless it exits 0 with nothing on stderr.
func cliOK(t *testing.T, addr string, args ...string) string {
	t.Helper()
	r := cli(t, addr, args...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("fila %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}
