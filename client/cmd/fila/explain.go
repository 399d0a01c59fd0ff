package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// fila explain: why a message, or a fairness key's backlog, is not delivered now, asked of the
// broker's HTTP listener (GET /api/v1/queues/{queue}/messages/{id}/explain and
// /api/v1/queues/{queue}/keys/{key}/explain, docs/admin-api.md). The broker answers from its
// scheduler's own state; each reason comes with the figure behind it.

// explainReason is one reason of an explanation, as the admin API gives it.
type explainReason struct {
	Reason string `json:"reason"`
	Text   string `json:"text"`
}

// messageExplanation is the admin API's explanation of a message (the fields printed).
type messageExplanation struct {
	ID             string          `json:"id"`
	Queue          string          `json:"queue"`
	State          string          `json:"state"`
	DeliverableNow bool            `json:"deliverable_now"`
	FairnessKey    string          `json:"fairness_key"`
	Group          string          `json:"group"`
	Grouped        bool            `json:"grouped"`
	Attempts       uint32          `json:"attempts"`
	MaxAttempts    uint32          `json:"max_attempts"`
	EnqueuedAt     int64           `json:"enqueued_at"`
	LastError      string          `json:"last_error"`
	Reasons        []explainReason `json:"reasons"`
}

// keyExplanation is the admin API's explanation of a fairness key (the fields printed).
type keyExplanation struct {
	Key                       string          `json:"key"`
	Queue                     string          `json:"queue"`
	Backlog                   uint64          `json:"backlog"`
	Ready                     uint64          `json:"ready"`
	Held                      uint64          `json:"held"`
	InFlight                  uint64          `json:"in_flight"`
	Weight                    uint32          `json:"weight"`
	Deficit                   uint64          `json:"deficit"`
	Quantum                   uint32          `json:"quantum"`
	InRound                   bool            `json:"in_round"`
	HasTurn                   bool            `json:"has_turn"`
	RoundKeys                 int             `json:"round_keys"`
	KeysAhead                 int             `json:"keys_ahead"`
	DeliveriesAhead           uint64          `json:"deliveries_ahead"`
	DeliveriesLastMinute      uint64          `json:"deliveries_last_minute"`
	QueueDeliveriesLastMinute uint64          `json:"queue_deliveries_last_minute"`
	WeightedShare             float64         `json:"weighted_share"`
	Reasons                   []explainReason `json:"reasons"`
}

func (a *app) explainCommand() *cobra.Command {
	h := &httpAdmin{}
	var key string
	cmd := &cobra.Command{
		Use:   "explain QUEUE [MSGID | --key KEY]",
		Short: "Say why a message, or a fairness key's backlog, is not delivered now",
		Long: "Explains, from the broker's scheduler state, where message MSGID of QUEUE is and every reason it is not\n" +
			"delivered now, each with its figure: delayed until, leased by whom until when (attempt k of n), waiting behind\n" +
			"the head of its ordering group, held by a throttle's bucket until it has room, waiting for its fairness key's\n" +
			"DRR turn behind K keys, parked by a script error, held by the reclaim grace, no subscriber, no credit; or\n" +
			"dead-lettered. With --key KEY instead of MSGID, explains fairness key KEY: its backlog, weight, deficit, place\n" +
			"in the DRR round, deliveries in the last minute against its weighted share, and what holds its messages.\n" +
			"With --dlq, explains in the dead-letter queue. --json prints the broker's answer. Asked of the broker's HTTP\n" +
			"listener; needs admin or consume on the queue.",
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case key == "" && len(args) != 2:
				return usagef("%s needs QUEUE MSGID, or QUEUE --key KEY", commandName(cmd))
			case key != "" && len(args) != 1:
				return usagef("%s --key KEY takes QUEUE alone", commandName(cmd))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := h.queue(args[0])
			if key != "" {
				return a.explainKey(cmd.Context(), h, queue, key)
			}
			return a.explainMessage(cmd.Context(), h, queue, args[1])
		},
	}
	h.flags(cmd)
	cmd.Flags().StringVar(&key, "key", "", "explain this fairness key instead of a message")
	return cmd
}

// explainMessage prints the broker's explanation of message id of queue.
func (a *app) explainMessage(ctx context.Context, h *httpAdmin, queue, id string) error {
	var raw json.RawMessage
	if err := a.adminHTTP(ctx, h.addr, http.MethodGet, queuePath(queue, "messages", id, "explain"), &raw); err != nil {
		return err
	}
	if a.json {
		return a.printJSON(raw)
	}
	var x messageExplanation
	if err := json.Unmarshal(raw, &x); err != nil {
		return fmt.Errorf("the answer of %s is not the admin API's: %v", h.addr, err)
	}
	var b strings.Builder
	verdict := "not deliverable now"
	if x.DeliverableNow {
		verdict = "deliverable now: the queue's next delivery is this message"
	}
	fmt.Fprintf(&b, "message %s of %s: %s, %s\n", x.ID, x.Queue, x.State, verdict)
	fmt.Fprintf(&b, "  fairness key %q", x.FairnessKey)
	if x.Grouped {
		fmt.Fprintf(&b, ", ordering group %q", x.Group)
	}
	fmt.Fprintf(&b, ", %d attempt(s)", x.Attempts)
	if x.MaxAttempts > 0 {
		fmt.Fprintf(&b, " of %d", x.MaxAttempts)
	}
	if x.EnqueuedAt > 0 {
		fmt.Fprintf(&b, ", enqueued %s", time.UnixMilli(x.EnqueuedAt).UTC().Format(time.RFC3339Nano))
	}
	b.WriteString("\n")
	if x.LastError != "" {
		fmt.Fprintf(&b, "  last error: %s\n", x.LastError)
	}
	writeReasons(&b, x.Reasons)
	return a.printf("%s", b.String())
}

// explainKey prints the broker's explanation of fairness key key of queue.
func (a *app) explainKey(ctx context.Context, h *httpAdmin, queue, key string) error {
	var raw json.RawMessage
	if err := a.adminHTTP(ctx, h.addr, http.MethodGet, queuePath(queue, "keys", key, "explain"), &raw); err != nil {
		return err
	}
	if a.json {
		return a.printJSON(raw)
	}
	var x keyExplanation
	if err := json.Unmarshal(raw, &x); err != nil {
		return fmt.Errorf("the answer of %s is not the admin API's: %v", h.addr, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "fairness key %q of %s\n", x.Key, x.Queue)
	fmt.Fprintf(&b, "  backlog %d (ready %d, held %d), in flight %d\n", x.Backlog, x.Ready, x.Held, x.InFlight)
	fmt.Fprintf(&b, "  weight %d, deficit %d, quantum %d\n", x.Weight, x.Deficit, x.Quantum)
	switch {
	case x.HasTurn:
		fmt.Fprintf(&b, "  DRR round of %d key(s): holds the turn\n", x.RoundKeys)
	case x.InRound:
		fmt.Fprintf(&b, "  DRR round of %d key(s): %d key(s) ahead, %d deliveries left in their turns\n", x.RoundKeys, x.KeysAhead, x.DeliveriesAhead)
	default:
		fmt.Fprintf(&b, "  not in the DRR round (no ready message)\n")
	}
	got := 0.0
	if x.QueueDeliveriesLastMinute > 0 {
		got = float64(x.DeliveriesLastMinute) / float64(x.QueueDeliveriesLastMinute)
	}
	fmt.Fprintf(&b, "  deliveries in the last minute: %d of the queue's %d (%.1f%%); its weighted share %.1f%%\n",
		x.DeliveriesLastMinute, x.QueueDeliveriesLastMinute, 100*got, 100*x.WeightedShare)
	writeReasons(&b, x.Reasons)
	return a.printf("%s", b.String())
}

// writeReasons lists an explanation's reasons, one a line.
func writeReasons(b *strings.Builder, rs []explainReason) {
	if len(rs) == 0 {
		return
	}
	b.WriteString("reasons:\n")
	for _, r := range rs {
		fmt.Fprintf(b, "  - %s: %s\n", r.Reason, r.Text)
	}
}
