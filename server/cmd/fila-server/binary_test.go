package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/internal/fibptest"
)

// The crash test runs the real binary, kills it with SIGKILL under enqueue and consume load, and
// restarts it on the same data directory: every enqueue it acknowledged must still be there or
// have been acked, nothing it acknowledged as acked may come back, and the dead-letter queue must
// be intact.

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildServer compiles the binary once for every test of the package.
func buildServer(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "fila-server-test-")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "fila-server")
		// Built as the image builds it (CGO_ENABLED=0 -trimpath, deploy/Dockerfile), the configuration
		// make test compiles in, so that the build reuses its cache.
		cmd := exec.Command("go", "build", "-buildvcs=auto", "-trimpath", "-o", builtBin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// startBinary runs bin on dataDir listening on addr ("127.0.0.1:0" on a first start, the
// address first reported on a restart) without HTTP, and returns once it is ready.
func startBinary(t *testing.T, bin, dataDir, addr string) *serverProc {
	t.Helper()
	return startServer(t, bin, nil, "--data-dir", dataDir, "--listen", addr, "--http-listen", "", "--log-level", "warn")
}

// ledger records what the server acknowledged before the crash.
type ledger struct {
	mu          sync.Mutex
	enqueued    map[wire.UUID]string // ID → payload, for every Ok EnqueueResult
	ackSent     map[wire.UUID]bool
	ackConfirmd map[wire.UUID]bool
}

// counts returns how many enqueues and how many acks the server has acknowledged so far.
func (l *ledger) counts() (enqueued, ackConfirmed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.enqueued), len(l.ackConfirmd)
}

func rawConn(addr string) (net.Conn, *wire.FrameReader, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	fr := wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)
	if _, err := nc.Write(fibp.AppendFrame(nil, 0, 0, &fibp.Handshake{ProtocolVersion: 1, ClientCapabilities: fibp.CapCreditFlowControl})); err != nil {
		return nil, nil, err
	}
	if _, err := fr.Next(); err != nil {
		return nil, nil, err
	}
	return nc, fr, nil
}

// produceTo enqueues batches of ten to queue, recording every Ok, until the connection dies; tag
// names the producer in the payloads.
func produceTo(addr, queue, tag string, l *ledger) {
	nc, fr, err := rawConn(addr)
	if err != nil {
		return
	}
	defer nc.Close()
	for n := 0; ; n++ {
		req := &fibp.Enqueue{}
		for i := range 10 {
			req.Messages = append(req.Messages, fibp.EnqueueMessage{Queue: queue, Payload: fmt.Appendf(nil, "%s-%d-%d", tag, n, i)})
		}
		if _, err := nc.Write(fibp.AppendFrame(nil, 0, uint32(n+1), req)); err != nil {
			return
		}
		body, err := fr.Next()
		if err != nil {
			return
		}
		_, rest, _ := fibp.ParseHeader(body)
		var res fibp.EnqueueResult
		if res.Decode(rest) != nil {
			return
		}
		l.mu.Lock()
		for i, r := range res.Results {
			if r.ErrorCode == fibp.CodeOk {
				l.enqueued[r.MessageID] = string(req.Messages[i].Payload)
			}
		}
		l.mu.Unlock()
	}
}

// consume acks every other delivery until the connection dies.
func consume(addr string, l *ledger) {
	nc, fr, err := rawConn(addr)
	if err != nil {
		return
	}
	defer nc.Close()
	nc.Write(fibp.AppendFrame(nil, 0, 1, &fibp.Consume{Queue: "crash", Credit: 64}))
	pending := map[uint32][]wire.UUID{}
	next := uint32(100)
	skip := false
	for {
		body, err := fr.Next()
		if err != nil {
			return
		}
		h, rest, _ := fibp.ParseHeader(body)
		switch h.Opcode {
		case fibp.OpDelivery:
			var d fibp.Delivery
			if d.Decode(rest) != nil {
				return
			}
			ack := &fibp.Ack{}
			for _, m := range d.Messages {
				if skip = !skip; skip {
					continue // left leased: it must be redelivered after the restart
				}
				ack.Items = append(ack.Items, fibp.AckItem{Queue: "crash", MessageID: m.MessageID})
			}
			credit := &fibp.Credit{AdditionalCredit: uint32(len(d.Messages))}
			next++
			ids := make([]wire.UUID, len(ack.Items))
			l.mu.Lock()
			for i, it := range ack.Items {
				ids[i] = it.MessageID
				l.ackSent[it.MessageID] = true
			}
			l.mu.Unlock()
			pending[next] = ids
			out := fibp.AppendFrame(nil, 0, next, ack)
			out = fibp.AppendFrame(out, 0, 1, credit)
			if _, err := nc.Write(out); err != nil {
				return
			}
		case fibp.OpAckResult:
			var r fibp.AckResult
			if r.Decode(rest) != nil {
				return
			}
			l.mu.Lock()
			for i, res := range r.Results {
				if res.ErrorCode == fibp.CodeOk {
					l.ackConfirmd[pending[h.RequestID][i]] = true
				}
			}
			l.mu.Unlock()
			delete(pending, h.RequestID)
		}
	}
}

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	dir := t.TempDir()
	srv := startBinary(t, bin, dir, "127.0.0.1:0")
	addr := srv.addrs.FIBP

	c := fibptest.Dial(t, addr)
	c.Handshake()
	for _, q := range []*fibp.CreateQueue{
		{Name: "crash", VisibilityTimeoutMs: 500, Backoff: fibp.BackoffNone, MaxAttempts: 1000},
		{Name: "doomed", MaxAttempts: 1},
	} {
		if r := c.Call(1, q).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatal(r.ErrorCode)
		}
	}
	// Fill the dead-letter queue of "doomed": one attempt each, all nacked.
	const dead = 20
	var doomed []fibp.EnqueueMessage
	for i := range dead {
		doomed = append(doomed, fibp.EnqueueMessage{Queue: "doomed", Payload: fmt.Appendf(nil, "dead-%d", i)})
	}
	c.Call(2, &fibp.Enqueue{Messages: doomed})
	c.Subscribe(3, "doomed", 0)
	nack := &fibp.Nack{}
	for _, d := range c.Deliveries(dead) {
		nack.Items = append(nack.Items, fibp.NackItem{Queue: "doomed", MessageID: d.MessageID, Error: "fatal"})
	}
	c.Call(4, nack)
	deadline := time.Now().Add(10 * time.Second)
	for c.Call(5, &fibp.GetStats{Queue: "doomed.dlq"}).(*fibp.GetStatsResult).Depth != dead {
		if time.Now().After(deadline) {
			t.Fatal("the DLQ never filled")
		}
		time.Sleep(10 * time.Millisecond)
	}

	l := &ledger{enqueued: map[wire.UUID]string{}, ackSent: map[wire.UUID]bool{}, ackConfirmd: map[wire.UUID]bool{}}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(2)
		go func() { defer wg.Done(); produceTo(addr, "crash", "p", l) }()
		go func() { defer wg.Done(); consume(addr, l) }()
	}
	// The kill comes once the load is well under way (not after a fixed time, which a loaded
	// machine may spend before a single acknowledgement).
	deadline = time.Now().Add(time.Minute) // a safety net against a hang
	for enqueued, confirmed := l.counts(); enqueued < 5000 || confirmed < 1000; enqueued, confirmed = l.counts() {
		if time.Now().After(deadline) {
			t.Fatalf("the load did not get going: %d enqueues acknowledged, %d acks confirmed", enqueued, confirmed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.stop(syscall.SIGKILL)
	wg.Wait()
	t.Logf("before the crash: %d enqueues acknowledged, %d acks sent, %d acks confirmed", len(l.enqueued), len(l.ackSent), len(l.ackConfirmd))

	srv = startBinary(t, bin, dir, addr)
	defer srv.stop(syscall.SIGTERM)
	c = fibptest.Dial(t, addr)
	c.Handshake()
	st := c.Call(6, &fibp.GetStats{Queue: "crash"}).(*fibp.GetStatsResult)
	total := int(st.Depth + st.InFlight)
	c.Subscribe(7, "crash", 0)
	after := map[wire.UUID]string{}
	for len(after) < total {
		_, f := c.Next()
		d, ok := f.(*fibp.Delivery)
		if !ok {
			continue // an AckResult
		}
		for _, m := range d.Messages {
			after[m.MessageID] = string(m.Payload)
			c.Send(8, &fibp.Ack{Items: []fibp.AckItem{{Queue: "crash", MessageID: m.MessageID}}})
		}
	}
	for id, payload := range l.enqueued {
		got, present := after[id]
		switch {
		case present && got != payload:
			t.Fatalf("message %v came back with payload %q, enqueued as %q", id, got, payload)
		case !present && !l.ackSent[id]:
			t.Fatalf("acknowledged enqueue %v (%q) was lost", id, payload)
		}
	}
	for id := range l.ackConfirmd {
		if _, back := after[id]; back {
			t.Fatalf("acked message %v was delivered again after the restart", id)
		}
	}
	admin := fibptest.Dial(t, addr)
	admin.Handshake()
	if s := admin.Call(9, &fibp.GetStats{Queue: "doomed.dlq"}).(*fibp.GetStatsResult); s.Depth != dead {
		t.Fatalf("the DLQ holds %d messages after the restart, want %d", s.Depth, dead)
	}
	t.Logf("after the restart: %d messages redelivered, DLQ intact", len(after))
}

func TestMetricsHealthAndGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	dir := t.TempDir()
	var logs lockedBuffer
	first := startServer(t, bin, &logs, "--data-dir", dir, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-format", "json")
	addr, httpAddr := first.addrs.FIBP, first.addrs.HTTP

	c := fibptest.Dial(t, addr)
	c.Handshake()
	c.Call(1, &fibp.CreateQueue{Name: "metered"})
	c.Call(2, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "metered", Payload: []byte("x")}}})
	c.Call(3, &fibp.GetStats{Queue: "absent"})

	if body := httpGet(t, "http://"+httpAddr+"/healthz"); body != "ok\n" {
		t.Fatalf("/healthz said %q", body)
	}
	if body := httpGet(t, "http://"+httpAddr+"/readyz"); body != "ready\n" {
		t.Fatalf("/readyz said %q", body)
	}
	metrics := httpGet(t, "http://"+httpAddr+"/metrics")
	for _, want := range []string{
		`fila_queue_depth{queue="metered"} 1`,
		`fila_enqueued_total{queue="metered"} 1`,
		`fila_connections 1`,
		`fila_storage_commit_seconds_bucket`,
		`fila_queue_active_fairness_keys{queue="metered"} 1`,
		`fila_queue_fairness_key_ready{key="default",queue="metered"} 1`,
		`fila_queue_oldest_ready_age_seconds{queue="metered"} `,
		`fila_queue_stored_bytes{queue="metered"} `,
		`fila_delivery_wait_seconds_count{queue="metered"} 0`,
		`fila_ack_latency_seconds_count{queue="metered"} 0`,
		`fila_redriven_total{queue="metered"} 0`,
		`fila_errors_total{code="QueueNotFound"} 1`,
		`fila_storage_disk_bytes `,
		`fila_engine_mapped_bytes `,
		`fila_engine_scratch_bytes `,
		`fila_engine_scratch_fallbacks_total 0`,
		`fila_engine_map_limit_fallbacks_total 0`,
		`fila_engine_mappings `,
		`fila_storage_lsm_l0_sublevels `,
		`fila_storage_lsm_tables `,
		`fila_storage_lsm_compaction_debt_bytes `,
		`fila_storage_lsm_write_stalls_total `,
		`fila_storage_lsm_memtables 1`,
		buildInfoLine(t, bin),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// SIGTERM: the client is told Disconnect, the process exits 0 and the data is flushed.
	first.cmd.Process.Signal(syscall.SIGTERM)
	_, f := c.Next()
	if f.Opcode() != fibp.OpDisconnect {
		t.Fatalf("on shutdown the server sent %v, want Disconnect", f.Opcode())
	}
	if err := first.wait(); err != nil {
		t.Fatalf("fila-server exited with %v\n%s", err, logs.String())
	}
	for _, want := range []string{
		`"msg":"stopped"`,
		`"msg":"connection opened","conn":1,"remote":"127.0.0.1:`,
		`"msg":"admin request","conn":1,"remote":"127.0.0.1:`, // CreateQueue at info
		`"msg":"connection closed"`,
		`"open_for":"`, // durations as text, not nanoseconds
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), `"op":"GetStats"`) {
		t.Errorf("a read-only admin request was logged at info:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "no scratch files") {
		t.Errorf("the server ran without scratch files:\n%s", logs.String())
	}
	// A scratch file a crash left behind is removed at the next start.
	stale := filepath.Join(dir, scratchDirName, "region-1-1")
	if err := os.WriteFile(stale, []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startBinary(t, bin, dir, addr)
	defer srv.stop(syscall.SIGTERM)
	c = fibptest.Dial(t, addr)
	c.Handshake()
	if s := c.Call(4, &fibp.GetStats{Queue: "metered"}).(*fibp.GetStatsResult); s.Depth != 1 {
		t.Fatalf("after a clean restart the queue holds %d messages, want 1", s.Depth)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale scratch file survived the start: %v", err)
	}
}

func TestHelpAndBadFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server binary")
	}
	bin := buildServer(t)
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "FILA_DATA_DIR") || !strings.Contains(string(out), "-http-listen") {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "--max-inflight", "lots").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `--max-inflight: "lots" is not an integer`) {
		t.Fatalf("a bad flag: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "--lisen", "x").CombinedOutput()
	if err == nil || string(out) != "fila-server: unknown flag: --lisen (see fila-server --help)\n" {
		t.Fatalf("an unknown flag must print one line: %v\n%s", err, out)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
