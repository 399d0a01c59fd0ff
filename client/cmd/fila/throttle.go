package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/spf13/cobra"
)

func (a *app) throttleCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "throttle", Short: "Inspect subscriber-declared throttles"})
	var top uint32
	stats := &cobra.Command{
		Use:   "stats NAME",
		Short: "Show a throttle: its effective limits, where it is active and its most-waiting buckets",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ask(a, cmd, func(ctx context.Context, c *fila.Client) (*fila.ThrottleStats, error) {
				return c.GetThrottleStats(ctx, args[0], top)
			}, a.printThrottleStats)
		},
	}
	stats.Flags().Uint32Var(&top, "top", 10, "how many of the most-waiting buckets to show")
	var missing bool
	bucket := &cobra.Command{
		Use:   "bucket NAME [VALUE...]",
		Short: "Show one bucket of a throttle: one VALUE per key part (none for an unkeyed throttle)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("%s needs NAME", commandName(cmd))
			}
			if missing && len(args) > 1 {
				return usagef("--missing names the shared bucket of messages without the key: it takes no VALUE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			kind := fila.BucketKindKeyed
			if missing {
				kind = fila.BucketKindMissingKeyShared
			}
			return ask(a, cmd, func(ctx context.Context, c *fila.Client) (*fila.BucketStats, error) {
				return c.GetThrottleBucket(ctx, args[0], kind, args[1:])
			}, func(b *fila.BucketStats) error {
				return a.printTable([]string{"BUCKET", "COUNTED", "WAITING", "NEXT ROOM"}, [][]string{bucketRow(b)})
			})
		},
	}
	bucket.Flags().BoolVar(&missing, "missing", false, "the shared bucket of messages missing the key")
	cmd.AddCommand(stats, bucket)
	return cmd
}

func (a *app) printThrottleStats(st *fila.ThrottleStats) error {
	s := &st.Summary
	queues := make([]string, len(st.Queues))
	for i, q := range st.Queues {
		queues[i] = q.Queue
	}
	limits := make([]string, len(s.Limits))
	for i, l := range s.Limits {
		limits[i] = fmt.Sprintf("%d/%v", l.MaxDeliveries, time.Duration(l.WindowMs)*time.Millisecond)
	}
	if err := a.printTable(nil, [][]string{
		{"name", s.Name},
		{"limits", strings.Join(limits, " ")},
		{"key", orDash(fila.FormatKey(s.Key))},
		{"key missing", s.WhenKeyMissing.String()},
		{"subscribers", num(s.DeclaringSubscribers)},
		{"queues", orDash(strings.Join(queues, " "))},
		{"active buckets", num(st.ActiveBuckets)},
		{"buckets at limit", num(st.BucketsAtLimit)},
		{"waiting", num(st.Waiting)},
	}); err != nil {
		return err
	}
	if len(st.Buckets) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout)
	rows := make([][]string, len(st.Buckets))
	for i := range st.Buckets {
		rows[i] = bucketRow(&st.Buckets[i])
	}
	return a.printTable([]string{"BUCKET", "COUNTED", "WAITING", "NEXT ROOM"}, rows)
}

// bucketRow formats a bucket: its values (or "(missing key)", "(all)"), its count under each
// limit, what waits in it and when it next has room.
func bucketRow(b *fila.BucketStats) []string {
	name := strings.Join(b.Values, ",")
	switch {
	case b.BucketKind == fila.BucketKindMissingKeyShared:
		name = "(missing key)"
	case len(b.Values) == 0:
		name = "(all)"
	}
	counted := make([]string, len(b.Counted))
	for i, n := range b.Counted {
		counted[i] = num(n)
	}
	room := "now"
	if b.NextRoomAt != 0 {
		room = timeCell(time.UnixMilli(int64(b.NextRoomAt)))
	}
	return []string{name, strings.Join(counted, " "), num(b.Waiting), room}
}
