package main

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/client/rift"
)

// riftToken authenticates the benchmark's Rift identity, which may publish and subscribe anywhere.
const riftToken = "bench-token"

// riftConfig is the fila-server configuration file of the Rift workloads.
const riftConfig = `rift:
  identities:
    - {name: bench, token: ` + riftToken + `, publish: [">"], subscribe: [">"]}
`

// riftUnavailable says why the Rift workloads cannot run on Fila's side, or "" when they can.
func riftUnavailable(filaBin string) string {
	if out, _ := exec.Command(filaBin, "--help").CombinedOutput(); !strings.Contains(string(out), "rift-listen") {
		return "this fila-server has no --rift-listen setting"
	}
	return ""
}

// freeUDPAddr returns a loopback UDP address that was free a moment ago, for the QUIC listener.
func freeUDPAddr() (string, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer pc.Close()
	return pc.LocalAddr().String(), nil
}

// riftConnect opens an authenticated Rift connection to the peer, trusting the tool's CA.
func (e *env) riftConnect(ctx context.Context, p *peer) (*rift.Client, error) {
	return rift.Connect(ctx, p.riftAddr, "localhost", e.certs.client, riftToken)
}

// riftPubSub measures messages per second received by one subscriber from one publisher, each on
// its own QUIC connection, with the same publishing window as NATS core.
func riftPubSub(size int) side {
	return func(ctx context.Context, e *env, p *peer) ([]float64, error) {
		sc, err := e.riftConnect(ctx, p)
		if err != nil {
			return nil, err
		}
		defer sc.Close()
		sub, err := sc.Subscribe(ctx, "pubsub", "")
		if err != nil {
			return nil, err
		}
		defer sub.Close()
		var received atomic.Int64
		go func() {
			for {
				if _, err := sub.Recv(context.Background()); err != nil {
					return
				}
				received.Add(1)
			}
		}()
		pc, err := e.riftConnect(ctx, p)
		if err != nil {
			return nil, err
		}
		defer pc.Close()
		pub, err := pc.Publisher(ctx)
		if err != nil {
			return nil, err
		}
		payload := make([]byte, size)
		stop, failed := pumpWindowed(received.Load, func() error { return pub.Publish(ctx, "pubsub", "", payload) })
		defer stop()
		rate, err := e.measureRate(ctx, "fila rift pubsub", received.Load)
		select {
		case err = <-failed:
		default:
		}
		return []float64{rate}, err
	}
}

// riftReqReply times Rift request/reply round trips of 1 KB, one at a time: a responder
// subscribed to "service" publishes each payload back to the request's reply subject.
func riftReqReply(ctx context.Context, e *env, p *peer) ([]float64, error) {
	rc, err := e.riftConnect(ctx, p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	sub, err := rc.Subscribe(ctx, "service", "")
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	rpub, err := rc.Publisher(ctx)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			m, err := sub.Recv(context.Background())
			if err != nil || rpub.Publish(context.Background(), m.Reply, "", m.Payload) != nil {
				return
			}
		}
	}()
	qc, err := e.riftConnect(ctx, p)
	if err != nil {
		return nil, err
	}
	defer qc.Close()
	payload := make([]byte, 1024)
	p50, p99, err := e.measureLatency(ctx, "fila rift request/reply", func() (time.Duration, error) {
		start := time.Now()
		m, err := qc.Request(ctx, "service", payload, 5*time.Second)
		if err == nil && len(m.Payload) != len(payload) {
			err = errors.New("the reply is not the request's payload")
		}
		return time.Since(start), err
	})
	return []float64{p50, p99}, err
}
