package main

import (
	"context"
	"strings"

	"github.com/filamq/fila/client/rift"
	"github.com/spf13/cobra"
)

// The stream administration commands: `fila rift stream create|list|describe|delete`. They need
// a control identity allowed to publish to rift.control.stream.* (docs/rift.md).

func (a *app) riftStreamCreateCommand(rf *riftFlags) *cobra.Command {
	var cfg rift.StreamConfig
	var maxAge duration
	cmd := &cobra.Command{
		Use:   "create NAME --subject PATTERN...",
		Short: "Create a durable stream (kept across restarts); the same definition again is not an error",
		Args:  exactArgs("NAME"),
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&cfg.Subjects, "subject", nil, "subject pattern the stream stores (repeat for several), required")
	fs.StringVar(&cfg.Durability, "durability", "fsync", "when a write is acknowledged: fsync, os or memory (not kept across restarts)")
	fs.Int64Var(&cfg.MaxMsgs, "max-msgs", 0, "most records kept, the oldest removed first (0 = unlimited)")
	fs.Int64Var(&cfg.MaxBytes, "max-bytes", 0, "most bytes (subject + reply + payload) kept (0 = unlimited)")
	fs.DurationVar(&maxAge.Duration, "max-age", 0, "oldest record kept, such as 24h (0 = unlimited)")
	fs.IntVar(&cfg.MaxPayload, "max-payload", 0, "largest payload accepted in bytes (0 = 1 MiB, the protocol's limit)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(cfg.Subjects) == 0 {
			return usagef("give at least one --subject PATTERN")
		}
		cfg.Name, cfg.MaxAge = args[0], maxAge.Duration
		var in rift.StreamInfo
		var created bool
		err := rf.with(cmd.Context(), a.timeout.Duration, func(ctx context.Context, c *rift.Client) (err error) {
			in, created, err = c.CreateStream(ctx, cfg)
			return err
		})
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(map[string]any{"created": created, "stream": in})
		}
		if created {
			return a.printf("created stream %s\n", shown(in.Name))
		}
		return a.printf("stream %s exists with this definition\n", shown(in.Name))
	}
	return cmd
}

func (a *app) riftStreamListCommand(rf *riftFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the durable streams with their subjects and counters",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []rift.StreamInfo
			err := rf.with(cmd.Context(), a.timeout.Duration, func(ctx context.Context, c *rift.Client) (err error) {
				list, err = c.Streams(ctx)
				return err
			})
			if err != nil {
				return err
			}
			if a.json {
				if list == nil {
					list = []rift.StreamInfo{}
				}
				return a.printJSON(map[string]any{"streams": list})
			}
			rows := make([][]string, len(list))
			for i, in := range list {
				rows[i] = []string{in.Name, strings.Join(in.Subjects, " "), in.Durability, num(in.Messages), num(in.Bytes),
					num(in.Consumers), in.Source}
			}
			return a.printTable([]string{"NAME", "SUBJECTS", "DURABILITY", "MESSAGES", "BYTES", "CONSUMERS", "DEFINED IN"}, rows)
		},
	}
}

func (a *app) riftStreamDescribeCommand(rf *riftFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a stream's definition and counters",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in rift.StreamInfo
			err := rf.with(cmd.Context(), a.timeout.Duration, func(ctx context.Context, c *rift.Client) (err error) {
				in, err = c.StreamInfo(ctx, args[0])
				return err
			})
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(in)
			}
			unlimited := func(v int64, s string) string {
				if v == 0 {
					return "unlimited"
				}
				return s
			}
			maxPayload := "1048576 (the protocol's limit)"
			if in.MaxPayload > 0 {
				maxPayload = num(in.MaxPayload)
			}
			return a.printTable(nil, [][]string{
				{"stream", in.Name}, {"subjects", strings.Join(in.Subjects, " ")}, {"durability", in.Durability},
				{"defined in", in.Source}, {"max msgs", unlimited(in.MaxMsgs, num(in.MaxMsgs))},
				{"max bytes", unlimited(in.MaxBytes, num(in.MaxBytes))},
				{"max age", unlimited(in.MaxAgeMs, in.MaxAge().String())}, {"max payload", maxPayload},
				{"messages", num(in.Messages)}, {"bytes", num(in.Bytes)}, {"first sequence", num(in.FirstSequence)},
				{"last sequence", num(in.LastSequence)}, {"consumers", num(in.Consumers)},
			})
		},
	}
}

func (a *app) riftStreamDeleteCommand(rf *riftFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a stream created at run time, with its records and consumers",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := rf.with(cmd.Context(), a.timeout.Duration, func(ctx context.Context, c *rift.Client) error {
				return c.DeleteStream(ctx, args[0])
			})
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]string{"deleted": args[0]})
			}
			return a.printf("stream %s deleted\n", shown(args[0]))
		},
	}
}
