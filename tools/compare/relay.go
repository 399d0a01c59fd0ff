package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
)

// The relay floor is pub/sub with no broker work, shaped as a broker run is: this process
// publishes on one bare quic-go connection and drains another, and a relay process of its own
// (this binary again, started with relayChildEnv) copies the first stream to the second. Under
// load, a process gets CPU in proportion to the threads it keeps running, so an in-process relay
// would not be comparable with a broker in a process of its own.

// relayChildEnv, when set (to "certFile,keyFile"), makes this binary run as the relay process.
const relayChildEnv = "FILA_COMPARE_RELAY"

// Roles a stream announces with its first byte to the relay process.
const (
	rolePublisher  = 'p'
	roleSubscriber = 's'
)

// floorQUIC is the quic-go configuration of the QUIC floors: the packet size and windows Rift
// uses on loopback.
func floorQUIC() *quic.Config {
	return &quic.Config{InitialPacketSize: 1452, MaxStreamReceiveWindow: 4 << 20, MaxConnectionReceiveWindow: 16 << 20}
}

// relayIfChild runs this process as the relay process, and exits, when relayChildEnv is set.
func relayIfChild() {
	spec := os.Getenv(relayChildEnv)
	if spec == "" {
		return
	}
	if err := relayChild(spec); err != nil {
		fmt.Fprintln(os.Stderr, "compare relay:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// relayChild is the relay process: it listens on loopback, prints its address, and copies the
// stream of the connection that announced itself as the publisher to the one of the subscriber
// until either ends.
func relayChild(spec string) error {
	certFile, keyFile, ok := strings.Cut(spec, ",")
	if !ok {
		return fmt.Errorf("%s=%q: want certFile,keyFile", relayChildEnv, spec)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	ln, err := quic.ListenAddr("127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"floor"}}, floorQUIC())
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Println(ln.Addr())
	ctx := context.Background()
	streams := map[byte]*quic.Stream{}
	for len(streams) < 2 {
		c, err := ln.Accept(ctx)
		if err != nil {
			return err
		}
		s, err := c.AcceptStream(ctx)
		if err != nil {
			return err
		}
		var role [1]byte
		if _, err := io.ReadFull(s, role[:]); err != nil {
			return err
		}
		streams[role[0]] = s
	}
	in, out := streams[rolePublisher], streams[roleSubscriber]
	if in == nil || out == nil {
		return errors.New("want one publisher and one subscriber")
	}
	relay(out, in)
	return nil
}

// relayFloor starts a relay process and measures how many 1 KB messages per second it relays,
// and the CPU per message of both processes.
func relayFloor(ctx context.Context, e *env, client *tls.Config, window time.Duration) (rate, cpu float64, err error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), relayChildEnv+"="+e.certs.certFile+","+e.certs.keyFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return 0, 0, fmt.Errorf("the relay process did not start: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	open := func(role byte) (*quic.Stream, func(), error) {
		c, err := quic.DialAddr(ctx, strings.TrimSpace(addr), client, floorQUIC())
		if err != nil {
			return nil, nil, err
		}
		s, err := c.OpenStreamSync(ctx)
		if err == nil {
			_, err = s.Write([]byte{role})
		}
		if err != nil {
			c.CloseWithError(0, "")
			return nil, nil, err
		}
		return s, func() { c.CloseWithError(0, "") }, nil
	}
	pub, closePub, err := open(rolePublisher)
	if err != nil {
		return 0, 0, err
	}
	defer closePub()
	sub, closeSub, err := open(roleSubscriber)
	if err != nil {
		return 0, 0, err
	}
	defer closeSub()
	go pour(pub)
	pid := cmd.Process.Pid
	rate, cpu = drain(sub, window, func() time.Duration { return selfCPU() + procCPU(pid) })
	return rate, cpu, nil
}

// relay copies from r to w until either fails, as a broker joins a publisher to a subscriber: a
// reader goroutine never waits for a write to be sent (it hands what it read over and reads on),
// and a writer goroutine writes what accumulated meanwhile, up to 64 KB, in one write (a plain
// io.Copy relays at a third of the rate: every read waits for the previous write). The read
// buffers are reused (at most relayChunks of them in flight), and the writer copies them into its
// batch: one copy per byte, as a broker's frame encoding makes.
func relay(w io.Writer, r io.Reader) {
	const relayChunks, chunkSize, batchSize = 64, 16 << 10, 64 << 10
	free, full := make(chan []byte, relayChunks), make(chan []byte, relayChunks)
	for range relayChunks {
		free <- make([]byte, chunkSize)
	}
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		batch := make([]byte, 0, batchSize)
		for c := range full {
			batch = append(batch[:0], c...)
			free <- c[:chunkSize]
			for more := true; more && len(batch) < batchSize; {
				select {
				case c, ok := <-full:
					if !ok {
						more = false
						break
					}
					batch = append(batch, c...)
					free <- c[:chunkSize]
				default:
					more = false
				}
			}
			if _, err := w.Write(batch); err != nil {
				return
			}
		}
	}()
	defer close(full)
	for {
		var c []byte
		select {
		case c = <-free:
		case <-stop: // the writer failed
			return
		}
		n, err := r.Read(c)
		if n > 0 {
			full <- c[:n]
		}
		if err != nil {
			return
		}
	}
}
