package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/filamq/fila/client/rift"
	"github.com/spf13/cobra"
)

// replyFlags configure `fila rift reply`.
type replyFlags struct {
	queue, file, command string
	count                int
	commandTimeout       duration
}

func (a *app) riftReplyCommand(rf *riftFlags) *cobra.Command {
	f := &replyFlags{}
	f.commandTimeout.Duration = 30 * time.Second
	cmd := &cobra.Command{
		Use:   "reply SUBJECT [PAYLOAD]",
		Short: "Answer requests on a subject: with PAYLOAD (or --file), with the output of --command, or else with the request itself",
		Long: `Subscribe to SUBJECT (a pattern, optionally in a --queue group) and answer every request,
printing each one. The answer is PAYLOAD or the contents of --file; with --command, the command
runs under sh -c for each request, with the request's payload on its standard input and
FILA_RIFT_SUBJECT set to its subject, and its standard output is the answer (a command that fails
still answers with what it printed; one that outlasts --command-timeout is killed and sends no
answer). With none of them the request's payload is sent back. Messages without a reply subject
are not requests and are skipped. "listening on SUBJECT" goes to standard error once the
subscription is in place.`,
		Args: rangeArgs(1, 2, "SUBJECT [PAYLOAD]"),
	}
	fs := cmd.Flags()
	fs.StringVar(&f.queue, "queue", "", "queue group: responders in one group share the requests")
	fs.StringVarP(&f.file, "file", "f", "", "answer with the contents of this file")
	fs.StringVar(&f.command, "command", "", "answer with the standard output of this shell command, given the request on standard input")
	fs.DurationVar(&f.commandTimeout.Duration, "command-timeout", f.commandTimeout.Duration, "longest --command may run for one request")
	fs.IntVar(&f.count, "count", 0, "exit after answering this many requests (0 = never)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if f.count < 0 || f.commandTimeout.Duration <= 0 {
			return usagef("--count must be 0 or more and --command-timeout positive")
		}
		answer, err := a.replyAnswer(f, args[1:])
		if err != nil {
			return err
		}
		return a.respond(cmd.Context(), rf, args[0], f, answer)
	}
	return cmd
}

// replyAnswer returns the function that computes the answer to a request.
func (a *app) replyAnswer(f *replyFlags, args []string) (func(ctx context.Context, m rift.Message) ([]byte, error), error) {
	if f.command != "" {
		if len(args) > 0 || f.file != "" {
			return nil, usagef("give --command, or a PAYLOAD or --file, not both")
		}
		return func(ctx context.Context, m rift.Message) ([]byte, error) { return runReplyCommand(ctx, f, m) }, nil
	}
	if len(args) == 0 && f.file == "" {
		return func(_ context.Context, m rift.Message) ([]byte, error) { return m.Payload, nil }, nil
	}
	payload, err := a.payload(args, f.file)
	if err != nil {
		return nil, err
	}
	return func(context.Context, rift.Message) ([]byte, error) { return payload, nil }, nil
}

// runReplyCommand runs --command for request m and returns its standard output.
func runReplyCommand(ctx context.Context, f *replyFlags, m rift.Message) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, f.commandTimeout.Duration)
	defer cancel()
	c := exec.CommandContext(ctx, "sh", "-c", f.command)
	c.Env = append(c.Environ(), "FILA_RIFT_SUBJECT="+m.Subject)
	c.Stdin = bytes.NewReader(m.Payload)
	var out bytes.Buffer
	c.Stdout = &out
	err := c.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("--command ran longer than %v: no answer sent", f.commandTimeout.Duration)
	}
	body := append([]byte{}, out.Bytes()...) // not nil: an empty output is still an answer
	if err != nil {
		return body, fmt.Errorf("--command: %w (answered with its output)", err)
	}
	return body, nil
}

// respond subscribes and answers requests until the context ends or f.count are answered.
func (a *app) respond(ctx context.Context, rf *riftFlags, subject string, f *replyFlags, answer func(context.Context, rift.Message) ([]byte, error)) error {
	dctx, cancel := context.WithTimeout(ctx, a.timeout.Duration)
	defer cancel()
	c, err := rf.dial(dctx)
	if err != nil {
		return err
	}
	defer c.Close()
	sub, err := c.Subscribe(dctx, subject, f.queue)
	if err != nil {
		return err
	}
	defer sub.Close()
	fmt.Fprintf(a.stderr, "listening on %s\n", shown(subject))
	for n := 0; f.count == 0 || n < f.count; {
		m, err := sub.Recv(ctx)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		if err != nil {
			return err
		}
		if m.Reply == "" {
			fmt.Fprintf(a.stderr, "fila: skipped a message on %s without a reply subject\n", shown(m.Subject))
			continue
		}
		if err := a.printMessage(m.Subject, m.Reply, m.Payload); err != nil {
			return err
		}
		body, err := answer(ctx, m)
		if err != nil {
			fmt.Fprintf(a.stderr, "fila: %v\n", err)
			if body == nil {
				continue
			}
		}
		if err := a.sendReply(ctx, c, m.Reply, body); err != nil {
			return err
		}
		n++
	}
	return nil
}

// sendReply publishes body to reply and waits until the server has routed it.
func (a *app) sendReply(ctx context.Context, c *rift.Client, reply string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, a.timeout.Duration)
	defer cancel()
	if err := c.Publish(ctx, reply, "", body); err != nil {
		return err
	}
	return c.Flush(ctx)
}
