package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/spf13/cobra"
)

// settingOrder is the order describe prints the settings it knows; others follow, sorted.
var settingOrder = []string{
	"visibility_timeout_ms", "max_attempts", "backoff", "backoff_initial_ms", "backoff_max_ms",
	"dedup_window_ms", "delivery_durability", "reclaim_grace_ms", "ordering", "ordering_key",
	"when_ordering_key_missing", "dedup_key", "script_failure", "park_dead_letter_after",
	"on_enqueue_script", "on_failure_script", "dlq_of",
}

// described is what queue describe prints.
type described struct {
	Queue    string    `json:"queue"`
	Settings []setting `json:"settings"`
}

// setting is one line of queue describe.
type setting struct {
	Name    string `json:"name"`
	Value   string `json:"value"`             // the effective value
	Stored  string `json:"stored"`            // what the queue's definition holds
	Follows string `json:"follows,omitempty"` // the runtime config key the value comes from, when it follows a default
}

func (a *app) queueDescribeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Show every setting of a queue, and which broker defaults it follows",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ask(a, cmd, func(ctx context.Context, c *fila.Client) (described, error) {
				st, err := c.GetStats(ctx, args[0])
				if err != nil {
					return described{}, err
				}
				defaults, err := c.ListConfig(ctx, "defaults.")
				if err != nil {
					return described{}, err
				}
				own, err := c.ListConfig(ctx, "queue."+args[0]+".")
				if err != nil {
					return described{}, err
				}
				return described{Queue: args[0], Settings: append(describe(st, defaults), describeLimits(args[0], st, defaults, own)...)}, nil
			}, func(d described) error {
				rows := make([][]string, len(d.Settings))
				for i, s := range d.Settings {
					rows[i] = []string{s.Name, s.Value, orDash(s.Follows)}
				}
				return a.printTable([]string{"SETTING", "VALUE", "FOLLOWS"}, rows)
			})
		},
	}
}

// describe resolves a queue's stored settings against the broker defaults: a zero number, an
// empty value or backoff server_default takes the value of defaults.<name>, when there is one.
func describe(st *fila.QueueStats, defaults []fila.ConfigEntry) []setting {
	def := map[string]string{}
	for _, e := range defaults {
		def[strings.TrimPrefix(e.Key, "defaults.")] = e.Value
	}
	names := make([]string, 0, len(st.Settings))
	for n := range st.Settings {
		names = append(names, n)
	}
	slices.SortFunc(names, func(x, y string) int {
		ix, iy := slices.Index(settingOrder, x), slices.Index(settingOrder, y)
		switch {
		case ix >= 0 && iy >= 0:
			return ix - iy
		case ix >= 0:
			return -1
		case iy >= 0:
			return 1
		}
		return strings.Compare(x, y)
	})
	out := make([]setting, 0, len(names)+1)
	for _, n := range names {
		s := setting{Name: n, Stored: st.Settings[n], Value: st.Settings[n]}
		if d, ok := def[n]; ok && followsDefault(s.Stored) {
			s.Value, s.Follows = d, "defaults."+n
		}
		s.Value = displayValue(n, s.Value)
		out = append(out, s)
	}
	return append(out, setting{Name: "quantum", Value: strconv.FormatUint(uint64(st.Quantum), 10),
		Stored: "", Follows: "scheduler.quantum"})
}

func followsDefault(stored string) bool {
	return stored == "" || stored == "0" || stored == "server_default"
}

// displayValue makes a value readable: milliseconds as a duration, a script as its size.
func displayValue(name, v string) string {
	switch {
	case strings.HasSuffix(name, "_ms"):
		if ms, err := strconv.ParseUint(v, 10, 63); err == nil {
			return v + " (" + (time.Duration(ms) * time.Millisecond).String() + ")"
		}
	case strings.HasSuffix(name, "_script"):
		if v == "" {
			return "none"
		}
		return strconv.Itoa(strings.Count(v, "\n")+1) + " lines of Lua"
	case v == "":
		return "-"
	}
	return v
}

// limitNames are the queue limits, runtime config only: queue.<name>.<limit> when set, else
// defaults.<limit>.
var limitNames = []string{"max_depth", "depth_policy", "retention_ms", "max_delay_ms"}

// describeLimits resolves a queue's limits from its own queue.<name>.* keys and the defaults; a
// server without them (older) shows none, nor does a dead-letter queue, which has no limits.
func describeLimits(queue string, st *fila.QueueStats, defaults, own []fila.ConfigEntry) []setting {
	if st.Settings["dlq_of"] != "" {
		return nil
	}
	values := map[string]string{}
	for _, e := range append(defaults, own...) {
		values[e.Key] = e.Value
	}
	var out []setting
	for _, n := range limitNames {
		s := setting{Name: n}
		if v := values["queue."+queue+"."+n]; v != "" {
			s.Value, s.Stored, s.Follows = v, v, "queue."+queue+"."+n
		} else if v, ok := values["defaults."+n]; ok {
			s.Value, s.Follows = v, "defaults."+n
		} else {
			continue
		}
		switch {
		case s.Value == "0" && n == "max_depth":
			s.Value = "0 (no limit)"
		case s.Value == "0" && n == "retention_ms":
			s.Value = "0 (for ever)"
		default:
			s.Value = displayValue(n, s.Value)
		}
		out = append(out, s)
	}
	return out
}
