package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// Looking at a queue's messages without touching them, deleting one, purging a queue: FIBP has
// no frame for these, so they are asked of the broker's HTTP listener (/api/v1/queues/..., see
// docs/admin-api.md) with the API key as the bearer, as fila backup create does.

// storedMessage is a message as the broker's admin API shows it.
type storedMessage struct {
	ID            string            `json:"id"`
	Queue         string            `json:"queue"`
	State         string            `json:"state"`
	FairnessKey   string            `json:"fairness_key"`
	Weight        uint32            `json:"weight"`
	OrderingGroup *string           `json:"ordering_group,omitempty"`
	Attempts      uint32            `json:"attempts"`
	RedriveCount  uint32            `json:"redrive_count"`
	LastError     string            `json:"last_error,omitempty"`
	EnqueuedAt    time.Time         `json:"enqueued_at"`
	NotBefore     *time.Time        `json:"not_before,omitempty"`
	Lease         *messageLease     `json:"lease,omitempty"`
	ClassifyTries uint32            `json:"classify_tries,omitempty"`
	Headers       map[string]string `json:"headers"`
	Payload       string            `json:"payload"`
	PayloadBytes  int               `json:"payload_bytes"`
	Preview       string            `json:"preview"`
	Truncated     bool              `json:"preview_truncated"`
	BodyMissing   bool              `json:"body_missing,omitempty"`
}

type messageLease struct {
	Consumer  string    `json:"consumer"`
	LeasedAt  time.Time `json:"leased_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// peekPage is the answer to a peek.
type peekPage struct {
	Queue    string          `json:"queue"`
	Messages []storedMessage `json:"messages"`
	Next     string          `json:"next,omitempty"`
}

// httpAdmin is the flags of the commands that use the broker's HTTP listener.
type httpAdmin struct {
	addr string
	dlq  bool
}

func (h *httpAdmin) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&h.addr, "http-addr", envOr("FILA_HTTP_ADDR", "127.0.0.1:9555"),
		"the broker's HTTP listener host:port, its http_listen (env FILA_HTTP_ADDR)")
	cmd.Flags().BoolVar(&h.dlq, "dlq", false, "act on the queue's dead-letter queue (QUEUE.dlq)")
}

// queue is the queue to act on: name, or its dead-letter queue with --dlq.
func (h *httpAdmin) queue(name string) string {
	if h.dlq && !strings.HasSuffix(name, ".dlq") {
		return name + ".dlq"
	}
	return name
}

func (a *app) queuePeekCommand() *cobra.Command {
	h := &httpAdmin{}
	var count int
	var after string
	var all bool
	cmd := &cobra.Command{
		Use:   "peek QUEUE",
		Short: "Show a queue's messages without leasing them",
		Long: "Shows the stored messages of QUEUE (with --dlq, of its dead-letter queue), oldest first, with their state,\n" +
			"attempts and the start of their payload, asked of the broker's HTTP listener: nothing is leased, no attempt\n" +
			"counted. --count messages a page (1 to 1000); --after ID continues after a page; --all pages to the end.\n" +
			"--json prints the broker's answer: every field, the payloads in base64. Needs admin or consume on the queue.",
		Args: exactArgs("QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 || count > 1000 {
				return usagef("--count %d: want 1 to 1000", count)
			}
			return a.peek(cmd.Context(), h, h.queue(args[0]), count, after, all)
		},
	}
	h.flags(cmd)
	cmd.Flags().IntVarP(&count, "count", "n", 10, "messages a page, 1 to 1000")
	cmd.Flags().StringVar(&after, "after", "", "start after the message with this ID (the previous page's last)")
	cmd.Flags().BoolVar(&all, "all", false, "page through the whole queue")
	return cmd
}

// peek prints the pages of queue.
func (a *app) peek(ctx context.Context, h *httpAdmin, queue string, count int, after string, all bool) error {
	var pages []peekPage
	for {
		q := url.Values{"count": {fmt.Sprint(count)}}
		if after != "" {
			q.Set("after", after)
		}
		var page peekPage
		if err := a.adminHTTP(ctx, h.addr, http.MethodGet, queuePath(queue, "messages")+"?"+q.Encode(), &page); err != nil {
			return err
		}
		pages = append(pages, page)
		if !all || page.Next == "" {
			break
		}
		after = page.Next
	}
	if a.json {
		if len(pages) == 1 {
			return a.printJSON(pages[0])
		}
		merged := peekPage{Queue: queue}
		for _, p := range pages {
			merged.Messages = append(merged.Messages, p.Messages...)
		}
		return a.printJSON(merged)
	}
	var rows [][]string
	for _, p := range pages {
		for _, m := range p.Messages {
			rows = append(rows, []string{m.ID, m.State, num(m.Attempts), m.FairnessKey, timeCell(m.EnqueuedAt), previewCell(m)})
		}
	}
	if len(rows) == 0 {
		return a.printf("queue %s holds no messages\n", queue)
	}
	if err := a.printTable([]string{"ID", "STATE", "ATTEMPTS", "FAIRNESS KEY", "ENQUEUED", "PAYLOAD"}, rows); err != nil {
		return err
	}
	if next := pages[len(pages)-1].Next; next != "" {
		return a.printf("more: fila queue peek %s --after %s\n", queue, next)
	}
	return nil
}

// previewCell is the start of a message's payload for a table, cut to 40 characters.
func previewCell(m storedMessage) string {
	const width = 40
	p := strings.Map(func(r rune) rune { // one line a message
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, m.Preview)
	if utf8.RuneCountInString(p) > width {
		p = string([]rune(p)[:width])
		m.Truncated = true
	}
	if m.Truncated {
		p += "…"
	}
	if m.BodyMissing {
		return "(body missing)"
	}
	return p
}

func (a *app) messageCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "message", Short: "Show or delete one stored message"})
	get, del := &httpAdmin{}, &httpAdmin{}
	getCmd := &cobra.Command{
		Use:   "get QUEUE ID",
		Short: "Show a stored message without leasing it",
		Long: "Shows the message ID of QUEUE (with --dlq, of its dead-letter queue): its state, attempts, last error, lease,\n" +
			"headers and payload (as text when it is UTF-8, else base64), asked of the broker's HTTP listener. Needs\n" +
			"admin or consume on the queue.",
		Args: exactArgs("QUEUE", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var m storedMessage
			if err := a.adminHTTP(cmd.Context(), get.addr, http.MethodGet, queuePath(get.queue(args[0]), "messages", args[1]), &m); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(m)
			}
			return a.printStored(m)
		},
	}
	get.flags(getCmd)
	delCmd := &cobra.Command{
		Use:   "delete QUEUE ID",
		Short: "Delete one stored message, in whatever state it is",
		Long: "Deletes the message ID of QUEUE (with --dlq, of its dead-letter queue) for good, leased or not (its consumer's\n" +
			"Ack is then answered MessageNotFound), through the queue's log. Needs admin on the queue.",
		Args: exactArgs("QUEUE", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := del.queue(args[0])
			var res map[string]any
			if err := a.adminHTTP(cmd.Context(), del.addr, http.MethodDelete, queuePath(queue, "messages", args[1]), &res); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			return a.printf("deleted message %s from %s\n", args[1], queue)
		},
	}
	del.flags(delCmd)
	cmd.AddCommand(getCmd, delCmd)
	return cmd
}

// printStored prints one stored message, a field a line, then its headers and payload.
func (a *app) printStored(m storedMessage) error {
	rows := [][]string{{"id", m.ID}, {"queue", m.Queue}, {"state", m.State}, {"fairness key", m.FairnessKey},
		{"weight", num(m.Weight)}, {"attempts", num(m.Attempts)}, {"redrive count", num(m.RedriveCount)},
		{"enqueued at", timeCell(m.EnqueuedAt)}}
	if m.OrderingGroup != nil {
		rows = append(rows, []string{"ordering group", *m.OrderingGroup})
	}
	if m.NotBefore != nil {
		rows = append(rows, []string{"not before", timeCell(*m.NotBefore)})
	}
	if m.LastError != "" {
		rows = append(rows, []string{"last error", m.LastError})
	}
	if l := m.Lease; l != nil {
		rows = append(rows, []string{"leased to", l.Consumer}, []string{"leased at", timeCell(l.LeasedAt)},
			[]string{"lease expires", timeCell(l.ExpiresAt)})
	}
	for _, k := range slices.Sorted(maps.Keys(m.Headers)) {
		rows = append(rows, []string{"header " + k, m.Headers[k]})
	}
	rows = append(rows, []string{"payload bytes", num(m.PayloadBytes)})
	if err := a.printTable(nil, rows); err != nil {
		return err
	}
	if m.BodyMissing {
		return a.printf("(the body was not found in the broker's store)\n")
	}
	payload, err := base64.StdEncoding.DecodeString(m.Payload)
	if err != nil {
		return fmt.Errorf("the broker's answer holds a payload that is not base64: %v", err)
	}
	if utf8.Valid(payload) {
		return a.printf("\n%s\n", shown(string(payload)))
	}
	return a.printf("\npayload (base64, not UTF-8):\n%s\n", m.Payload)
}

func (a *app) queuePurgeCommand() *cobra.Command {
	h := &httpAdmin{}
	var force bool
	cmd := &cobra.Command{
		Use:   "purge QUEUE --force",
		Short: "Delete every message of a queue",
		Long: "Deletes every message stored in QUEUE (with --dlq, in its dead-letter queue) when the purge begins, leased\n" +
			"ones included (their consumers' Acks are then answered MessageNotFound), through the queue's log, and\n" +
			"prints how many. It cannot be undone, so it needs --force. Needs admin on the queue.",
		Args: exactArgs("QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := h.queue(args[0])
			if !force {
				return usagef("purge deletes every message of %s for good, leased ones included: pass --force to do it", queue)
			}
			var res struct {
				Queue  string `json:"queue"`
				Purged uint64 `json:"purged"`
			}
			if err := a.adminHTTP(cmd.Context(), h.addr, http.MethodPost, queuePath(queue, "purge"), &res); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			return a.printf("purged %d messages from %s\n", res.Purged, queue)
		},
	}
	h.flags(cmd)
	cmd.Flags().BoolVar(&force, "force", false, "really delete every message")
	return cmd
}

// queuePath is the admin API's path of queue's resource parts.
func queuePath(queue string, parts ...string) string {
	p := "/api/v1/queues/" + url.PathEscape(queue)
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// adminHTTP sends one request to the broker's HTTP listener at addr and decodes its answer into
// v; a refusal is an error with the broker's reason. A purge may take long: its time limit is
// the context's, --timeout bounding connecting.
func (a *app) adminHTTP(ctx context.Context, addr, method, path string, v any) error {
	return a.adminHTTPWith(ctx, addr, method, path, "{}", v)
}

// adminHTTPWith is adminHTTP with reqBody, a JSON value, as the request's body.
func (a *app) adminHTTPWith(ctx context.Context, addr, method, path, reqBody string, v any) error {
	if method != http.MethodPost {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.timeout.Duration)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, strings.NewReader(reqBody))
	if err != nil {
		return usagef("--http-addr %q: %v", addr, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if a.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+a.apiKey)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: a.timeout.Duration}).DialContext}}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the broker's HTTP listener at %s (its http_listen; pass --http-addr or set FILA_HTTP_ADDR): %w", addr, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return a.adminRefused(addr, res.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("the answer of %s is not the admin API's: %v", addr, err)
	}
	return nil
}

// adminRefused says why the broker refused an admin API request.
func (a *app) adminRefused(addr string, status int, body []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return fmt.Errorf("%s answered HTTP %d: it is not a fila-server HTTP listener, or its release predates the admin API: %s",
			addr, status, strings.TrimSpace(string(body)))
	}
	err := fmt.Errorf("the broker refused: %s (HTTP %d)", e.Error, status)
	if status == http.StatusUnauthorized && a.apiKey == "" {
		return fmt.Errorf("%w; pass --api-key or set FILA_API_KEY", err)
	}
	return err
}
