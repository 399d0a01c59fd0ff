package fila_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/repobuild"
	"github.com/filamq/fila/client/internal/serverproc"
)

// brokerAddr is the address of the broker the Examples talk to: TestMain starts a fila-server
// and puts its address here.
var brokerAddr = "127.0.0.1:5555"

// serverBin is the fila-server TestMain built, for the tests that start brokers of their own.
var serverBin string

// serverWait bounds the wait for a broker to get ready or to stop; a safety net, never asserted.
const serverWait = 30 * time.Second

// TestMain builds fila-server and starts the broker of the Examples (this module may not import
// the server, so the SDK's tests against a real broker run it as a subprocess).
func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "fila-sdk-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	serverBin = filepath.Join(tmp, "fila-server")
	if err := repobuild.Build(serverBin, "./server/cmd/fila-server"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv, err := startBroker(filepath.Join(tmp, "data"), "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the Examples' fila-server:", err)
		return 1
	}
	brokerAddr = srv.addr
	code := m.Run()
	if err := srv.stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- fila-server log:\n%s", srv.Log.String())
	}
	return code
}

// broker is one fila-server subprocess and the FIBP address it bound.
type broker struct {
	*serverproc.Process
	addr string
}

// startBroker runs fila-server on dataDir listening on addr and returns once it is ready.
func startBroker(dataDir, addr string) (*broker, error) {
	p, a, err := serverproc.Start(serverBin, dataDir, addr, serverWait)
	if err != nil {
		return nil, err
	}
	return &broker{Process: p, addr: a.FIBP}, nil
}

// stop sends SIGTERM and waits for the process; it reports an unclean exit.
func (b *broker) stop() error { return b.Stop(serverWait) }
