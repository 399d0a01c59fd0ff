package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/filamq/fila/client/rift"
	"github.com/spf13/cobra"
)

// riftFlags are the connection settings of the rift commands (Rift is a separate QUIC listener,
// so it has its own address, CA and token).
type riftFlags struct {
	addr, ca, serverName, token, tokenFile string
}

// riftCommand is `fila rift pub|sub|req|reply|stream …`.
func (a *app) riftCommand() *cobra.Command {
	rf := &riftFlags{}
	cmd := group(&cobra.Command{Use: "rift", Short: "Publish, subscribe, request, reply and use durable streams on the Rift listener (QUIC)"})
	pf := cmd.PersistentFlags()
	pf.StringVar(&rf.addr, "rift-addr", envOr("FILA_RIFT_ADDR", "127.0.0.1:7443"), "Rift listener host:port (env FILA_RIFT_ADDR)")
	pf.StringVar(&rf.ca, "rift-ca", os.Getenv("FILA_RIFT_CA"), "PEM CA that signed the Rift server certificate, required (env FILA_RIFT_CA)")
	pf.StringVar(&rf.serverName, "server-name", "localhost", "name the Rift server certificate must carry")
	pf.StringVar(&rf.token, "token", os.Getenv("FILA_RIFT_TOKEN"), "identity token (env FILA_RIFT_TOKEN)")
	pf.StringVar(&rf.tokenFile, "token-file", "", "read the identity token from this file")
	cmd.AddCommand(a.riftPubCommand(rf), a.riftSubCommand(rf), a.riftReqCommand(rf), a.riftReplyCommand(rf), a.riftStreamCommand(rf))
	return cmd
}

// with connects within timeout and runs fn with the client and the context bounded by it.
func (rf *riftFlags) with(ctx context.Context, timeout time.Duration, fn func(ctx context.Context, c *rift.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := rf.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c)
}

// dial connects and authenticates.
func (rf *riftFlags) dial(ctx context.Context) (*rift.Client, error) {
	if rf.ca == "" {
		return nil, usagef("--rift-ca is required: Rift always verifies the server certificate")
	}
	token := rf.token
	if rf.tokenFile != "" {
		b, err := os.ReadFile(rf.tokenFile)
		if err != nil {
			return nil, err
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return nil, usagef("give --token, --token-file or FILA_RIFT_TOKEN")
	}
	tc, err := rift.TLSConfig(rf.ca)
	if err != nil {
		return nil, err
	}
	return rift.Connect(ctx, rf.addr, rf.serverName, tc, token)
}

func (a *app) riftPubCommand(rf *riftFlags) *cobra.Command {
	var reply, file string
	var count int
	cmd := &cobra.Command{
		Use:   "pub SUBJECT [PAYLOAD]",
		Short: "Publish a message (the payload is the argument, --file, or standard input) and flush",
		Args:  rangeArgs(1, 2, "SUBJECT [PAYLOAD]"),
	}
	cmd.Flags().StringVar(&reply, "reply", "", "reply subject (a literal _INBOX.<...> subject you may subscribe to)")
	cmd.Flags().StringVarP(&file, "file", "f", "", "read the payload from this file ('-' = standard input)")
	cmd.Flags().IntVar(&count, "count", 1, "publish the message this many times")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		payload, err := a.payload(args[1:], file)
		if err != nil {
			return err
		}
		err = rf.with(cmd.Context(), a.timeout.Duration, func(ctx context.Context, c *rift.Client) error {
			pub, err := c.Publisher(ctx)
			if err != nil {
				return err
			}
			for range count {
				if err := pub.Publish(ctx, args[0], reply, payload); err != nil {
					return err
				}
			}
			return pub.Flush(ctx)
		})
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(map[string]any{"subject": args[0], "published": count})
		}
		_, err = fmt.Fprintf(a.stdout, "published %d to %s\n", count, args[0])
		return err
	}
	return cmd
}

func (a *app) riftSubCommand(rf *riftFlags) *cobra.Command {
	var queue string
	var count int
	cmd := &cobra.Command{
		Use:   "sub PATTERN",
		Short: "Subscribe and print messages until interrupted (or --count messages)",
		Args:  exactArgs("PATTERN"),
	}
	cmd.Flags().StringVar(&queue, "queue", "", "queue group")
	cmd.Flags().IntVar(&count, "count", 0, "exit after this many messages (0 = never)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		dctx, cancel := context.WithTimeout(ctx, a.timeout.Duration)
		defer cancel()
		c, err := rf.dial(dctx)
		if err != nil {
			return err
		}
		defer c.Close()
		sub, err := c.Subscribe(dctx, args[0], queue)
		if err != nil {
			return err
		}
		defer sub.Close()
		for n := 0; count == 0 || n < count; n++ {
			m, err := sub.Recv(ctx)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := a.printMessage(m.Subject, m.Reply, m.Payload); err != nil {
				return err
			}
		}
		return nil
	}
	return cmd
}

func (a *app) printMessage(subject, reply string, payload []byte) error {
	if a.json {
		return a.printJSON(map[string]any{"subject": subject, "reply": reply, "payload": string(payload)})
	}
	if reply != "" {
		_, err := fmt.Fprintf(a.stdout, "%s (reply %s): %s\n", shown(subject), shown(reply), shown(string(payload)))
		return err
	}
	_, err := fmt.Fprintf(a.stdout, "%s: %s\n", shown(subject), shown(string(payload)))
	return err
}

func (a *app) riftReqCommand(rf *riftFlags) *cobra.Command {
	var file string
	var wait duration
	wait.Duration = 5 * time.Second
	cmd := &cobra.Command{
		Use:   "req SUBJECT [PAYLOAD]",
		Short: "Send a request and print the first reply",
		Args:  rangeArgs(1, 2, "SUBJECT [PAYLOAD]"),
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "read the payload from this file ('-' = standard input)")
	cmd.Flags().DurationVar(&wait.Duration, "wait", wait.Duration, "how long the server waits for a reply (1ms-2m)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		payload, err := a.payload(args[1:], file)
		if err != nil {
			return err
		}
		return rf.with(cmd.Context(), a.timeout.Duration+wait.Duration, func(ctx context.Context, c *rift.Client) error {
			m, err := c.Request(ctx, args[0], payload, wait.Duration)
			if err != nil {
				return err
			}
			return a.printMessage(m.Subject, m.Reply, m.Payload)
		})
	}
	return cmd
}

func (a *app) riftStreamCommand(rf *riftFlags) *cobra.Command {
	cmd := group(&cobra.Command{Use: "stream", Short: "Durable streams: create, list, describe and delete them; publish, fetch and acknowledge"})
	var reply, file string
	pub := &cobra.Command{
		Use:   "pub STREAM SUBJECT [PAYLOAD]",
		Short: "Store a message in a stream and print its sequence",
		Args:  rangeArgs(2, 3, "STREAM SUBJECT [PAYLOAD]"),
	}
	pub.Flags().StringVar(&reply, "reply", "", "reply subject stored with the record")
	pub.Flags().StringVarP(&file, "file", "f", "", "read the payload from this file ('-' = standard input)")
	pub.RunE = func(cmd *cobra.Command, args []string) error {
		payload, err := a.payload(args[2:], file)
		if err != nil {
			return err
		}
		var st rift.Stored
		err = rf.with(cmd.Context(), a.timeout.Duration, func(ctx context.Context, c *rift.Client) (err error) {
			st, err = c.StreamPublish(ctx, args[0], args[1], reply, payload)
			return err
		})
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(map[string]any{"sequence": st.Sequence, "timestamp_millis": st.TimestampMillis})
		}
		_, err = fmt.Fprintf(a.stdout, "stored %s #%d\n", args[0], st.Sequence)
		return err
	}
	cmd.AddCommand(a.riftStreamCreateCommand(rf), a.riftStreamListCommand(rf), a.riftStreamDescribeCommand(rf),
		a.riftStreamDeleteCommand(rf), pub, a.riftFetchCommand(rf))
	return cmd
}

func (a *app) riftFetchCommand(rf *riftFlags) *cobra.Command {
	var cfg rift.ConsumerConfig
	var ackWait duration
	var limit int
	var ack bool
	ackWait.Duration = 30 * time.Second
	cmd := &cobra.Command{
		Use:   "fetch STREAM CONSUMER",
		Short: "Open (or resume) a durable consumer, fetch what is available and print it",
		Args:  exactArgs("STREAM", "CONSUMER"),
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Filter, "filter", "", "subject pattern (default: the whole stream)")
	fs.Uint64Var(&cfg.StartSequence, "start", 0, "first sequence (0 = the first retained record)")
	fs.DurationVar(&ackWait.Duration, "ack-wait", ackWait.Duration, "redelivery delay of unacknowledged records")
	fs.IntVar(&cfg.MaxAckPending, "max-pending", 1000, "most unacknowledged records")
	fs.IntVar(&limit, "limit", 10, "most records to fetch (1-256)")
	fs.BoolVar(&ack, "ack", false, "acknowledge each record after printing it")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg.AckWait = ackWait.Duration
		return rf.with(cmd.Context(), a.timeout.Duration, func(ctx context.Context, c *rift.Client) error {
			k, err := c.Consumer(ctx, args[0], args[1], cfg)
			if err != nil {
				return err
			}
			ds, err := k.Fetch(ctx, limit)
			if err != nil {
				return err
			}
			for _, d := range ds {
				if a.json {
					err = a.printJSON(map[string]any{"sequence": d.Sequence, "timestamp_millis": d.TimestampMillis,
						"delivery_count": d.DeliveryCount, "subject": d.Subject, "reply": d.Reply, "payload": string(d.Payload)})
				} else {
					_, err = fmt.Fprintf(a.stdout, "#%d (delivery %d) %s: %s\n", d.Sequence, d.DeliveryCount, shown(d.Subject), shown(string(d.Payload)))
				}
				if err != nil {
					return err
				}
				if ack {
					if err := k.Ack(ctx, d.Sequence); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	return cmd
}
