package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/filamq/fila/client/fila"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func (a *app) queueCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "queue", Short: "Create, change, delete and inspect queues"})
	cmd.AddCommand(a.queueCreateCommand(), a.queueUpdateCommand(), a.queueDeleteCommand(),
		a.queueListCommand(), a.queueStatsCommand(), a.queueDescribeCommand())
	return cmd
}

// choice parses one of a fixed set of names into its value.
func choice[T any](flag, value string, names map[string]T) (T, error) {
	if v, ok := names[value]; ok {
		return v, nil
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var zero T
	return zero, usagef("--%s %q: want one of %s", flag, value, strings.Join(keys, ", "))
}

var (
	backoffNames = map[string]fila.Backoff{"default": fila.BackoffServerDefault, "none": fila.BackoffNone,
		"fixed": fila.BackoffFixed, "exponential": fila.BackoffExponential}
	orderingNames = map[string]fila.Ordering{"none": fila.OrderingNone, "queue": fila.OrderingQueue,
		"grouped": fila.OrderingGrouped}
	missingKeyNames = map[string]fila.WhenOrderingKeyMissing{"reject": fila.WhenOrderingKeyMissingReject,
		"unordered": fila.WhenOrderingKeyMissingUnordered}
	scriptFailureNames = map[string]fila.ScriptFailure{"reject": fila.ScriptFailureReject, "park": fila.ScriptFailurePark}
	durabilityNames    = map[string]fila.DeliveryDurability{"committed": fila.DeliveryDurabilityCommitted,
		"fast": fila.DeliveryDurabilityFast}
)

// queueFlags are the settings shared by queue create and queue update.
type queueFlags struct {
	visibility, dedupWindow, backoffInitial, backoffMax, reclaimGrace duration
	maxAttempts, parkAfter                                            uint32
	backoff, durability, onEnqueue, onFailure                         string
}

func (q *queueFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&q.visibility.Duration, "visibility-timeout", 0, "lease duration of a delivery (0 = server default)")
	fs.DurationVar(&q.dedupWindow.Duration, "dedup-window", 0, "how long deduplication keys are remembered")
	fs.Uint32Var(&q.maxAttempts, "max-attempts", 0, "deliveries before dead-lettering")
	fs.StringVar(&q.backoff, "backoff", "default", "retry backoff: none, fixed, exponential or default")
	fs.DurationVar(&q.backoffInitial.Duration, "backoff-initial", 0, "first retry delay")
	fs.DurationVar(&q.backoffMax.Duration, "backoff-max", 0, "largest retry delay (exponential)")
	fs.StringVar(&q.durability, "durability", "committed", "delivery durability: committed or fast")
	fs.DurationVar(&q.reclaimGrace.Duration, "reclaim-grace", 0, "lease reclaim grace after failover (fast queues)")
	fs.Uint32Var(&q.parkAfter, "park-dead-letter-after", 0, "failed classifications before a parked message is dead-lettered")
	fs.StringVar(&q.onEnqueue, "on-enqueue", "", "Lua file defining on_enqueue")
	fs.StringVar(&q.onFailure, "on-failure", "", "Lua file defining on_failure")
}

func readScript(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	return string(b), err
}

func (a *app) queueCreateCommand() *cobra.Command {
	var q queueFlags
	var ordering, orderingKey, missing, dedupKey, scriptFailure string
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a queue (and its dead-letter queue NAME.dlq)",
		Args:  exactArgs("NAME"),
	}
	q.register(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVar(&ordering, "ordering", "none", "ordering: none, queue or grouped")
	fs.StringVar(&orderingKey, "ordering-key", "", "key of the ordering groups (grouped), e.g. header:customer")
	fs.StringVar(&missing, "when-ordering-key-missing", "reject", "reject or unordered")
	fs.StringVar(&dedupKey, "dedup-key", "", "deduplication key, e.g. idempotency_key or header:id,payload_hash")
	fs.StringVar(&scriptFailure, "script-failure", "reject", "when on_enqueue fails: reject or park")
	var shards uint32
	var httpAddr string
	fs.Uint32Var(&shards, "shards", 1, "split the queue into N shards, each led by its own node (1 to 64; fixed at creation; through the HTTP admin API, --http-addr)")
	fs.StringVar(&httpAddr, "http-addr", envOr("FILA_HTTP_ADDR", "127.0.0.1:9555"),
		"the broker's HTTP listener host:port, its http_listen (env FILA_HTTP_ADDR), for --shards")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if shards < 1 || shards > maxShards {
			return usagef("--shards %d: a queue has 1 to %d shards", shards, maxShards)
		}
		cfg := fila.QueueConfig{
			Name: args[0], VisibilityTimeout: q.visibility.Duration, DedupWindow: q.dedupWindow.Duration,
			MaxAttempts: q.maxAttempts, BackoffInitial: q.backoffInitial.Duration, BackoffMax: q.backoffMax.Duration,
			ReclaimGrace: q.reclaimGrace.Duration, ParkDeadLetterAfter: q.parkAfter,
		}
		var err error
		if cfg.Backoff, err = choice("backoff", q.backoff, backoffNames); err != nil {
			return err
		}
		if cfg.DeliveryDurability, err = choice("durability", q.durability, durabilityNames); err != nil {
			return err
		}
		if cfg.Ordering, err = choice("ordering", ordering, orderingNames); err != nil {
			return err
		}
		if cfg.WhenOrderingKeyMissing, err = choice("when-ordering-key-missing", missing, missingKeyNames); err != nil {
			return err
		}
		if cfg.ScriptFailure, err = choice("script-failure", scriptFailure, scriptFailureNames); err != nil {
			return err
		}
		if cfg.OrderingKey, err = fila.ParseKey(orderingKey); err != nil {
			return usageError{err}
		}
		if cfg.DedupKey, err = fila.ParseKey(dedupKey); err != nil {
			return usageError{err}
		}
		if cfg.OnEnqueueScript, err = readScript(q.onEnqueue); err != nil {
			return err
		}
		if cfg.OnFailureScript, err = readScript(q.onFailure); err != nil {
			return err
		}
		if shards > 1 {
			return a.createSharded(cmd, httpAddr, cfg, shards, queueNames{ordering: ordering, missing: missing, backoff: q.backoff,
				durability: q.durability, scriptFailure: scriptFailure})
		}
		return ask(a, cmd, func(ctx context.Context, c *fila.Client) (map[string]string, error) {
			id, err := c.CreateQueue(ctx, cfg)
			return map[string]string{"queue": cfg.Name, "queue_id": id}, err
		}, func(m map[string]string) error {
			return a.printf("queue %q created (id %s)\n", m["queue"], m["queue_id"])
		})
	}
	return cmd
}

func (a *app) queueUpdateCommand() *cobra.Command {
	var q queueFlags
	var removeOnEnqueue, removeOnFailure bool
	cmd := &cobra.Command{
		Use:   "update NAME",
		Short: "Change a queue's mutable settings (only the flags given)",
		Args:  exactArgs("NAME"),
	}
	q.register(cmd.Flags())
	cmd.Flags().BoolVar(&removeOnEnqueue, "remove-on-enqueue", false, "remove the on_enqueue script")
	cmd.Flags().BoolVar(&removeOnFailure, "remove-on-failure", false, "remove the on_failure script")
	// Settings fixed at creation are known here only to say so (the server would answer
	// ImmutableSetting; UpdateQueue cannot even carry them).
	var fixed string
	for _, name := range immutableFlags {
		cmd.Flags().StringVar(&fixed, name, "", "fixed at creation")
		_ = cmd.Flags().MarkHidden(name)
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		for _, name := range immutableFlags {
			if cmd.Flags().Changed(name) {
				return usagef("queue update: --%s is fixed at creation (ImmutableSetting); create a new queue to change it", name)
			}
		}
		u, err := q.update(cmd.Flags())
		if err != nil {
			return err
		}
		u.RemoveOnEnqueue, u.RemoveOnFailure = removeOnEnqueue, removeOnFailure
		if u == (fila.QueueUpdate{}) {
			return usagef("queue update: give at least one setting to change")
		}
		return ask(a, cmd, func(ctx context.Context, c *fila.Client) (map[string]string, error) {
			return map[string]string{"queue": args[0], "updated": "true"}, c.UpdateQueue(ctx, args[0], u)
		}, func(map[string]string) error { return a.printf("queue %q updated\n", args[0]) })
	}
	return cmd
}

// immutableFlags are the flags of queue create whose settings no update can change.
var immutableFlags = []string{"ordering", "ordering-key", "when-ordering-key-missing", "dedup-key", "script-failure"}

// update builds a QueueUpdate from the flags given on the command line.
func (q *queueFlags) update(fs *pflag.FlagSet) (fila.QueueUpdate, error) {
	var u fila.QueueUpdate
	set := fs.Changed
	if set("visibility-timeout") {
		u.VisibilityTimeout = &q.visibility.Duration
	}
	if set("dedup-window") {
		u.DedupWindow = &q.dedupWindow.Duration
	}
	if set("max-attempts") {
		u.MaxAttempts = &q.maxAttempts
	}
	if set("backoff-initial") {
		u.BackoffInitial = &q.backoffInitial.Duration
	}
	if set("backoff-max") {
		u.BackoffMax = &q.backoffMax.Duration
	}
	if set("reclaim-grace") {
		u.ReclaimGrace = &q.reclaimGrace.Duration
	}
	if set("park-dead-letter-after") {
		u.ParkDeadLetterAfter = &q.parkAfter
	}
	if set("backoff") {
		b, err := choice("backoff", q.backoff, backoffNames)
		if err != nil {
			return u, err
		}
		u.Backoff = &b
	}
	if set("durability") {
		d, err := choice("durability", q.durability, durabilityNames)
		if err != nil {
			return u, err
		}
		u.DeliveryDurability = &d
	}
	for _, s := range []struct {
		flag, path string
		dst        **string
	}{{"on-enqueue", q.onEnqueue, &u.OnEnqueueScript}, {"on-failure", q.onFailure, &u.OnFailureScript}} {
		if set(s.flag) {
			script, err := readScript(s.path)
			if err != nil {
				return u, err
			}
			*s.dst = &script
		}
	}
	return u, nil
}

func (a *app) queueDeleteCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a queue and its dead-letter queue; refused while they hold messages or consumers, unless --force",
		Long: `Delete a queue and its dead-letter queue, with every message they hold.

Unless --force is given, the CLI first reads both queues' statistics and refuses (exit 1) while
either holds a message (ready, delayed, leased or parked) or has a consumer. The check and the
deletion are two requests: a message enqueued or a consumer subscribed between them is deleted
or ended with the queue.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ask(a, cmd, func(ctx context.Context, c *fila.Client) (map[string]string, error) {
				if !force {
					if err := refuseBusyQueue(ctx, c, args[0]); err != nil {
						return nil, err
					}
				}
				return map[string]string{"deleted": args[0]}, c.DeleteQueue(ctx, args[0])
			}, func(map[string]string) error { return a.printf("queue %q deleted\n", args[0]) })
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete even while the queue or its dead-letter queue holds messages or has consumers")
	return cmd
}

// refuseBusyQueue returns an error when queue or its dead-letter queue holds a message or has a
// consumer, saying what it holds; a missing queue is left to DeleteQueue to report.
func refuseBusyQueue(ctx context.Context, c *fila.Client, queue string) error {
	for _, q := range []string{queue, queue + ".dlq"} {
		s, err := c.GetStats(ctx, q)
		if errors.Is(err, fila.ErrQueueNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if held := s.Depth + s.InFlight; held > 0 || s.ActiveConsumers > 0 {
			return fmt.Errorf("queue %q holds %d messages (%d leased) and has %d consumers: not deleted; pass --force to delete it with them",
				q, held, s.InFlight, s.ActiveConsumers)
		}
	}
	return nil
}

func (a *app) queueListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List queues with their depth and consumers",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ask(a, cmd, func(ctx context.Context, c *fila.Client) (*fila.QueueList, error) {
				return c.ListQueues(ctx)
			}, func(l *fila.QueueList) error {
				header := []string{"NAME", "DEPTH", "IN FLIGHT", "CONSUMERS"}
				if l.ClusterNodeCount > 0 {
					header = append(header, "LEADER")
				}
				rows := make([][]string, len(l.Queues))
				for i, q := range l.Queues {
					rows[i] = []string{q.Name, num(q.Depth), num(q.InFlight), num(q.ActiveConsumers)}
					if l.ClusterNodeCount > 0 {
						rows[i] = append(rows[i], orDash(q.LeaderNodeID))
					}
				}
				return a.printTable(header, rows)
			})
		},
	}
}

func (a *app) queueStatsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "stats NAME",
		Short: "Show a queue's live statistics",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ask(a, cmd, func(ctx context.Context, c *fila.Client) (*fila.QueueStats, error) {
				return c.GetStats(ctx, args[0])
			}, func(st *fila.QueueStats) error { return a.printStats(args[0], st) })
		},
	}
}

func (a *app) printStats(name string, st *fila.QueueStats) error {
	rows := [][]string{
		{"queue", name}, {"depth", num(st.Depth)}, {"in flight", num(st.InFlight)},
		{"delayed", num(st.Delayed)}, {"unclassified", num(st.Unclassified)},
		{"oldest unclassified", timeCell(st.OldestUnclassifiedAt)}, {"throttled", num(st.Throttled)},
		{"active fairness keys", num(st.ActiveFairnessKeys)}, {"active consumers", num(st.ActiveConsumers)},
		{"quantum", num(st.Quantum)}, {"leader node", orDash(st.LeaderNodeID)},
		{"replicas", orDash(st.ReplicationCount)},
	}
	if o := st.Settings["ordering"]; (o != "" && o != "none") || st.OrderingGroups > 0 {
		rows = append(rows, []string{"ordering groups", num(st.OrderingGroups)},
			[]string{"groups blocked by an in-flight head", num(st.OrderingGroupsBlocked)})
	}
	if err := a.printTable(nil, rows); err != nil {
		return err
	}
	if len(st.PerKeyStats) > 0 {
		fmt.Fprintln(a.stdout)
		rows = rows[:0]
		for _, k := range st.PerKeyStats {
			rows = append(rows, []string{k.Key, num(k.PendingCount), num(k.CurrentDeficit), num(k.Weight)})
		}
		if err := a.printTable([]string{"FAIRNESS KEY", "PENDING", "DEFICIT", "WEIGHT"}, rows); err != nil {
			return err
		}
	}
	if len(st.ActiveThrottles) > 0 {
		fmt.Fprintln(a.stdout)
		rows = rows[:0]
		for _, t := range st.ActiveThrottles {
			limits := make([]string, len(t.Limits))
			for i, l := range t.Limits {
				limits[i] = strconv.FormatUint(l.Max, 10) + "/" + l.Window.String()
			}
			rows = append(rows, []string{t.Name, strings.Join(limits, " "), orDash(fila.FormatKey(t.Key)),
				t.WhenKeyMissing.String(), num(t.DeclaringSubscribers)})
		}
		return a.printTable([]string{"THROTTLE", "LIMITS", "KEY", "KEY MISSING", "SUBSCRIBERS"}, rows)
	}
	return nil
}
