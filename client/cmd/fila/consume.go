package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/filamq/fila/client/fila"
	"github.com/spf13/cobra"
)

type consumeFlags struct {
	throttles []string
	ack       bool
	count     int
	credit    uint32
	wait      duration
}

func (a *app) consumeCommand() *cobra.Command {
	var f consumeFlags
	cmd := &cobra.Command{
		Use:   "consume QUEUE",
		Short: "Print deliveries from a queue, acking them with --ack",
		Long: "Print deliveries from a queue until --count messages were printed, nothing arrived for\n" +
			"--wait, or the command is interrupted. Without --ack the deliveries stay leased until\n" +
			"their lease expires, and then count as a failed attempt.",
		Args: exactArgs("QUEUE"),
	}
	fs := cmd.Flags()
	fs.BoolVar(&f.ack, "ack", false, "acknowledge each delivery after printing it")
	fs.IntVarP(&f.count, "count", "n", 0, "stop after this many deliveries (0 = no limit)")
	fs.Uint32Var(&f.credit, "credit", 0, "most unacked deliveries at once (default: --count, at most 256)")
	fs.DurationVar(&f.wait.Duration, "wait", 0, "stop when nothing arrives for this long (0 = wait forever)")
	fs.StringArrayVar(&f.throttles, "throttle", nil, "declare a throttle: NAME=N/WINDOW[,N/WINDOW…][;key=KEY][;missing=unthrottled] (repeatable)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return a.consume(cmd, args[0], f) }
	return cmd
}

// consumeOnLeader subscribes on the queue's leader at addr, which a node answered NotLeader
// naming; the connection to it replaces the first one.
func (a *app) consumeOnLeader(ctx context.Context, addr, queue string, opts fila.ConsumeOptions) (*fila.Consumer, error) {
	c, err := a.dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("the queue's leader at %s: %w", addr, err)
	}
	a.client.Close()
	a.client = c
	return c.Consume(ctx, queue, opts)
}

func (a *app) consume(cmd *cobra.Command, queue string, f consumeFlags) error {
	if f.count < 0 {
		return usagef("--count must not be negative")
	}
	credit := f.credit
	if credit == 0 {
		credit = fila.DefaultMaxUnacked
		if f.count > 0 && f.count < int(credit) {
			credit = uint32(f.count) // never lease more than will be printed
		}
	}
	var throttles []fila.Throttle
	for _, s := range f.throttles {
		th, err := fila.ParseThrottle(s)
		if err != nil {
			return usageError{err}
		}
		throttles = append(throttles, th)
	}
	c, ctx, cancel, err := a.request(cmd)
	if err != nil {
		return err
	}
	// The CLI acks at once or deliberately leaves a message alone: no lease keep-alive. With
	// --count it asks for that many deliveries in all: the acks must not earn credit for
	// messages it will not print (their leases would expire as failed attempts).
	opts := fila.ConsumeOptions{MaxUnacked: credit, DisableLeaseKeepAlive: true,
		MaxDeliveries: uint64(f.count), Throttles: throttles}
	cons, err := c.Consume(ctx, queue, opts)
	if leader, ok := fila.LeaderAddr(err); ok { // a node of a cluster that does not lead the queue
		cons, err = a.consumeOnLeader(ctx, leader, queue, opts)
	}
	cancel()
	if err != nil {
		return err
	}
	defer cons.Close()
	for n := 0; f.count == 0 || n < f.count; n++ {
		d, err := a.nextDelivery(cmd.Context(), cons, f.wait.Duration)
		if err != nil {
			return err
		}
		if d == nil {
			return nil // interrupted, or nothing for --wait
		}
		if err := a.printDelivery(d, f.ack); err != nil {
			return err
		}
		if f.ack {
			actx, acancel := context.WithTimeout(cmd.Context(), a.timeout.Duration)
			err := d.Ack(actx)
			acancel()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// nextDelivery waits for a delivery; nil without error means interrupted or idle for wait.
func (a *app) nextDelivery(ctx context.Context, cons *fila.Consumer, wait time.Duration) (*fila.Delivery, error) {
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	d, err := cons.Next(ctx)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil, nil
	}
	return d, err
}

// deliveryJSON is the --json form of one delivery (one object per line).
type deliveryJSON struct {
	ID             string            `json:"id"`
	Queue          string            `json:"queue"`
	Headers        map[string]string `json:"headers,omitempty"`
	Payload        *string           `json:"payload,omitempty"`
	PayloadBase64  []byte            `json:"payload_base64,omitempty"`
	FairnessKey    string            `json:"fairness_key"`
	Weight         uint32            `json:"weight"`
	AttemptCount   uint32            `json:"attempt_count"`
	RedriveCount   uint32            `json:"redrive_count"`
	EnqueuedAt     time.Time         `json:"enqueued_at"`
	LeasedAt       time.Time         `json:"leased_at"`
	LeaseExpiresAt time.Time         `json:"lease_expires_at"`
	Acked          bool              `json:"acked"`
}

func (a *app) printDelivery(d *fila.Delivery, acked bool) error {
	if a.json {
		j := deliveryJSON{
			ID: d.ID.String(), Queue: d.Queue, Headers: d.Headers, FairnessKey: d.FairnessKey, Weight: d.Weight,
			AttemptCount: d.AttemptCount, RedriveCount: d.RedriveCount, EnqueuedAt: d.EnqueuedAt,
			LeasedAt: d.LeasedAt, LeaseExpiresAt: d.LeaseExpiresAt, Acked: acked,
		}
		if utf8.Valid(d.Payload) {
			s := string(d.Payload)
			j.Payload = &s
		} else {
			j.PayloadBase64 = d.Payload
		}
		return json.NewEncoder(a.stdout).Encode(j)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  queue=%s attempt=%d fairness_key=%q", d.ID, d.Queue, d.AttemptCount, d.FairnessKey)
	if d.RedriveCount > 0 {
		fmt.Fprintf(&b, " redrives=%d", d.RedriveCount)
	}
	for _, k := range slices.Sorted(maps.Keys(d.Headers)) {
		fmt.Fprintf(&b, " %s=%q", shown(k), d.Headers[k])
	}
	if utf8.Valid(d.Payload) {
		fmt.Fprintf(&b, "\n%s\n", shown(string(d.Payload)))
	} else {
		fmt.Fprintf(&b, "\n(%d bytes of binary payload; use --json)\n", len(d.Payload))
	}
	_, err := fmt.Fprint(a.stdout, b.String())
	return err
}
