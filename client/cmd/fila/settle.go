package main

import (
	"errors"
	"fmt"

	"github.com/filamq/fila/client/fila"
	"github.com/spf13/cobra"
)

// parseIDs parses message IDs given as arguments.
func parseIDs(args []string) ([]fila.MessageID, error) {
	ids := make([]fila.MessageID, len(args))
	for i, s := range args {
		id, err := fila.ParseMessageID(s)
		if err != nil {
			return nil, usagef("%q is not a message ID: %v", s, err)
		}
		ids[i] = id
	}
	return ids, nil
}

// settled prints one line per settled message and joins the failures of single items.
func (a *app) settled(verb string, ids []fila.MessageID, errs []error) error {
	if a.json {
		out := make([]map[string]string, len(ids))
		for i, id := range ids {
			out[i] = map[string]string{"id": id.String(), "result": "ok"}
			if errs[i] != nil {
				out[i]["result"] = errs[i].Error()
			}
		}
		if err := a.printJSON(out); err != nil {
			return err
		}
	} else {
		for i, id := range ids {
			if errs[i] == nil {
				fmt.Fprintf(a.stdout, "%s %s\n", verb, id)
			}
		}
	}
	return errors.Join(errs...)
}

func (a *app) nackCommand() *cobra.Command {
	var errText string
	var retryAfter duration
	cmd := &cobra.Command{
		Use:   "nack QUEUE ID...",
		Short: "Report failed attempts: the messages are retried (after --retry-after) or dead-lettered",
		Long: "Nack leased messages by ID (as `fila consume` prints them): each counts as a failed attempt;\n" +
			"the queue's retry policy retries it after its backoff, or after --retry-after when given, or\n" +
			"moves it to the dead-letter queue once its attempts are spent.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("%s needs QUEUE and at least one message ID", commandName(cmd))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&errText, "error", "nacked with the fila CLI", "the failure's description, kept as the message's last error")
	cmd.Flags().DurationVar(&retryAfter.Duration, "retry-after", 0, "retry after this delay instead of the queue's backoff (0: at once; not given: the backoff decides)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ids, err := parseIDs(args[1:])
		if err != nil {
			return err
		}
		if retryAfter.Duration < 0 {
			return usagef("--retry-after must not be negative")
		}
		c, ctx, cancel, err := a.request(cmd)
		if err != nil {
			return err
		}
		defer cancel()
		items := make([]fila.NackItem, len(ids))
		for i, id := range ids {
			items[i] = fila.NackItem{Queue: args[0], ID: id, Error: errText}
			if cmd.Flags().Changed("retry-after") {
				items[i].RetryAfter = &retryAfter.Duration
			}
		}
		errs, err := c.Nack(ctx, items...)
		if err != nil {
			return err
		}
		return a.settled("nacked", ids, errs)
	}
	return cmd
}

func (a *app) ackCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "ack QUEUE ID...",
		Short: "Acknowledge leased messages by ID: they are removed for good",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("%s needs QUEUE and at least one message ID", commandName(cmd))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args[1:])
			if err != nil {
				return err
			}
			c, ctx, cancel, err := a.request(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			items := make([]fila.AckItem, len(ids))
			for i, id := range ids {
				items[i] = fila.AckItem{Queue: args[0], ID: id}
			}
			errs, err := c.Ack(ctx, items...)
			if err != nil {
				return err
			}
			return a.settled("acked", ids, errs)
		},
	}
}
