package main

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// pubsubWindow bounds the messages published but not yet received in the pub/sub workloads: NATS
// core has no flow control, so the publisher waits rather than overrun the subscriber.
const pubsubWindow = 10_000

// natsPubSub measures messages per second received by one subscriber from one publisher, over TLS.
func natsPubSub(size int) side {
	return func(ctx context.Context, e *env, p *peer) ([]float64, error) {
		sc, err := e.natsConnect(p)
		if err != nil {
			return nil, err
		}
		defer sc.Close()
		var received atomic.Int64
		sub, err := sc.Subscribe("pubsub", func(*nats.Msg) { received.Add(1) })
		if err != nil {
			return nil, err
		}
		sub.SetPendingLimits(-1, -1)
		if err := sc.Flush(); err != nil {
			return nil, err
		}
		pc, err := e.natsConnect(p)
		if err != nil {
			return nil, err
		}
		defer pc.Close()
		payload := make([]byte, size)
		quit, failed := make(chan struct{}), make(chan error, 1)
		go func() {
			var published int64
			stalled := time.Time{}
			for {
				select {
				case <-quit:
					return
				default:
				}
				if published-received.Load() >= pubsubWindow {
					if stalled.IsZero() {
						stalled = time.Now()
					} else if time.Since(stalled) > 10*time.Second {
						failed <- errors.New("the subscriber stopped receiving (messages dropped as a slow consumer?)")
						return
					}
					time.Sleep(50 * time.Microsecond)
					continue
				}
				stalled = time.Time{}
				if err := pc.Publish("pubsub", payload); err != nil {
					failed <- err
					return
				}
				published++
			}
		}()
		defer close(quit)
		rate, err := e.measureRate(ctx, "nats pubsub", received.Load)
		select {
		case err = <-failed:
		default:
		}
		return []float64{rate}, err
	}
}

// natsReqReply times request/reply round trips of 1 KB, one at a time, over TLS.
func natsReqReply(ctx context.Context, e *env, p *peer) ([]float64, error) {
	rc, err := e.natsConnect(p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if _, err := rc.Subscribe("service", func(m *nats.Msg) { m.Respond(m.Data) }); err != nil {
		return nil, err
	}
	if err := rc.Flush(); err != nil {
		return nil, err
	}
	qc, err := e.natsConnect(p)
	if err != nil {
		return nil, err
	}
	defer qc.Close()
	payload := make([]byte, 1024)
	p50, p99, err := e.measureLatency(ctx, "nats request/reply", func() (time.Duration, error) {
		start := time.Now()
		if _, err := qc.Request("service", payload, 5*time.Second); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	})
	return []float64{p50, p99}, err
}

// riftDriver runs Fila's side of the rift_* workloads. It stays nil until a file of this package
// that uses the Rift Go client (client/rift) sets it in an init function; the workloads then also
// need fila-server started with its Rift listener.
var riftDriver interface {
	pubsub(ctx context.Context, e *env, p *peer, size int) (float64, error)
	reqreply(ctx context.Context, e *env, p *peer) (p50, p99 float64, err error)
}

// riftUnavailable says why the Rift workloads cannot run on Fila's side, or "" when they can.
func riftUnavailable(root, filaBin string) string {
	var why []string
	if root != "" {
		if files, _ := filepath.Glob(filepath.Join(root, "client", "rift", "*.go")); len(files) == 0 {
			why = append(why, "the Rift Go client (client/rift) is not in this tree yet")
		}
	}
	if out, _ := exec.Command(filaBin, "--help").CombinedOutput(); !strings.Contains(string(out), "rift-listen") {
		why = append(why, "fila-server has no --rift-listen setting yet")
	}
	if riftDriver == nil {
		why = append(why, "this tool has no Rift driver compiled in")
	}
	return strings.Join(why, "; ")
}

func riftPubSub(size int) side {
	return func(ctx context.Context, e *env, p *peer) ([]float64, error) {
		if riftDriver == nil {
			return nil, errors.New("no Rift driver")
		}
		rate, err := riftDriver.pubsub(ctx, e, p, size)
		return []float64{rate}, err
	}
}

func riftReqReply(ctx context.Context, e *env, p *peer) ([]float64, error) {
	if riftDriver == nil {
		return nil, errors.New("no Rift driver")
	}
	p50, p99, err := riftDriver.reqreply(ctx, e, p)
	return []float64{p50, p99}, err
}
