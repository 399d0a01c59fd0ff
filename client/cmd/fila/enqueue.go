package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/filamq/fila/client/fila"
	"github.com/spf13/cobra"
)

func (a *app) enqueueCommand() *cobra.Command {
	var headers []string
	var m fila.Message
	var delay duration
	var file string
	cmd := &cobra.Command{
		Use:   "enqueue QUEUE [PAYLOAD]",
		Short: "Enqueue one message; the payload is the argument, --file, or standard input",
		Args:  rangeArgs(1, 2, "QUEUE [PAYLOAD]"),
	}
	fs := cmd.Flags()
	fs.StringArrayVarP(&headers, "header", "H", nil, "header k=v (repeatable)")
	fs.StringVar(&m.FairnessKey, "fairness-key", "", "fairness key (default: the queue's)")
	fs.Uint32Var(&m.Weight, "weight", 0, "weight of the fairness key (default: the queue's)")
	fs.DurationVar(&delay.Duration, "delay", 0, "deliver no sooner than this from now")
	fs.StringVar(&m.IdempotencyKey, "idempotency-key", "", "producer idempotency key")
	fs.StringVarP(&file, "file", "f", "", "read the payload from this file ('-' = standard input)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		m.Queue, m.Delay = args[0], delay.Duration
		if m.Delay < 0 { // the SDK would send it as no delay
			return usageError{fmt.Errorf("--delay %v: a delay cannot be negative", m.Delay)}
		}
		var err error
		if m.Headers, err = parseHeaders(headers); err != nil {
			return err
		}
		if m.Payload, err = a.payload(args[1:], file); err != nil {
			return err
		}
		c, ctx, cancel, err := a.request(cmd)
		if err != nil {
			return err
		}
		defer cancel()
		res, err := c.Enqueue(ctx, m)
		if err != nil {
			return err
		}
		r := res[0]
		if r.Err != nil {
			return r.Err
		}
		if a.json {
			return a.printJSON(map[string]any{"id": r.ID.String(), "duplicate": r.Duplicate})
		}
		if r.Duplicate {
			_, err = fmt.Fprintf(a.stdout, "%s (duplicate: already enqueued)\n", r.ID)
			return err
		}
		_, err = fmt.Fprintln(a.stdout, r.ID)
		return err
	}
	return cmd
}

func parseHeaders(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	h := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--header %q: want name=value", kv)
		}
		h[k] = v
	}
	return h, nil
}

// payload picks the message body: the argument, else --file, else standard input.
func (a *app) payload(args []string, file string) ([]byte, error) {
	switch {
	case len(args) == 1 && file != "":
		return nil, usagef("give the payload as an argument or with --file, not both")
	case len(args) == 1:
		return []byte(args[0]), nil
	case file != "" && file != "-":
		return os.ReadFile(file)
	}
	return io.ReadAll(a.stdin)
}
