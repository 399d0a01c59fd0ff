package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// The cluster's membership, through the broker's HTTP admin API (FIBP has no frame for it):
// list the members, remove one.

// removePoll is how often `fila cluster remove` asks how far the new replicas are; removeStall is
// how long they may stay the same before it gives up waiting.
var (
	removePoll  = 500 * time.Millisecond
	removeStall = 2 * time.Minute
)

// membersAnswer is GET /api/v1/cluster/members.
type membersAnswer struct {
	NodeID  string `json:"node_id"`
	Members []struct {
		ID        string `json:"id"`
		Address   string `json:"address"`
		Advertise string `json:"advertise"`
		Draining  bool   `json:"draining"`
		Up        bool   `json:"up"`
	} `json:"members"`
	Removed  []string `json:"removed"`
	Removals []struct {
		ID         string `json:"id"`
		GroupsLeft int    `json:"groups_left"`
		IDFree     bool   `json:"id_free"`
	} `json:"removals"`
	JoiningReplicas int `json:"joining_replicas"`
	JoiningGroups   int `json:"joining_groups"`
	UnsettledHere   int `json:"unsettled_here"`
}

// removeRow is what remove prints with --json.
type removeRow struct {
	NodeID string `json:"node_id"`
	// Groups counts the queue groups the node replicated, each placed again on another member;
	// CaughtUp is true once every new replica has caught up (false with --no-wait).
	Groups   int  `json:"groups"`
	CaughtUp bool `json:"caught_up"`
}

const membersAPI = "/api/v1/cluster/members"

func (a *app) memberCommands() []*cobra.Command {
	h := &httpAdmin{}
	members := &cobra.Command{
		Use:   "members",
		Short: "List the cluster's members, the removed node IDs and removals in progress",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var m membersAnswer
			if err := a.adminHTTP(cmd.Context(), h.addr, http.MethodGet, membersAPI, &m); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(m)
			}
			return a.printMembers(&m)
		},
	}
	members.Flags().StringVar(&h.addr, "http-addr", envOr("FILA_HTTP_ADDR", "127.0.0.1:9555"),
		"the broker's HTTP listener host:port, its http_listen (env FILA_HTTP_ADDR)")
	return []*cobra.Command{members, a.removeCommand()}
}

func (a *app) removeCommand() *cobra.Command {
	h := &httpAdmin{}
	var force, noWait bool
	cmd := &cobra.Command{
		Use:   "remove NODE_ID [--force]",
		Short: "Remove a drained node from the cluster; its queues get replicas on other nodes",
		Long: "Remove a node from the cluster for good. Each queue group it replicated gets a replica on\n" +
			"another member, which catches up from the group's leader before the removed node's replica\n" +
			"leaves the group; shows how many have caught up until all have, or returns at once with\n" +
			"--no-wait. The node must be drained first ('fila cluster drain NODE_ID'), and the removal\n" +
			"is refused when a queue, or the cluster's meta group, would be left without a majority of\n" +
			"its replicas reachable; --force removes it anyway (a node lost for good). The removed node,\n" +
			"if it runs, stops. Its ID is free again once every group has it out of its Raft\n" +
			"configuration ('fila cluster members' shows it \"removed (ID free)\"): a replacement with an\n" +
			"empty data directory may then join under it (--join). Ask another node than the one\n" +
			"removed (--http-addr).",
		Args: exactArgs("NODE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := nodeArg(args[0])
			if err != nil {
				return err
			}
			node := strconv.FormatUint(id, 10)
			var res struct {
				NodeID string `json:"node_id"`
				Groups int    `json:"groups"`
			}
			body := fmt.Sprintf(`{"force":%v}`, force)
			if err := a.adminHTTPWith(cmd.Context(), h.addr, http.MethodPost, membersAPI+"/"+url.PathEscape(node)+"/remove", body, &res); err != nil {
				return err
			}
			if noWait {
				if a.json {
					return a.printJSON(removeRow{NodeID: node, Groups: res.Groups})
				}
				return a.printf("node %s removed: %d queue %s placed on other nodes, catching up (see 'fila cluster members')\n",
					node, res.Groups, plural(res.Groups, "group", "groups"))
			}
			if !a.json {
				if err := a.printf("node %s removed: %d queue %s to place on other nodes\n", node, res.Groups, plural(res.Groups, "group", "groups")); err != nil {
					return err
				}
			}
			return a.waitReplaced(cmd, h.addr, node, res.Groups)
		},
	}
	cmd.Flags().StringVar(&h.addr, "http-addr", envOr("FILA_HTTP_ADDR", "127.0.0.1:9555"),
		"the broker's HTTP listener host:port, its http_listen (env FILA_HTTP_ADDR)")
	cmd.Flags().BoolVar(&force, "force", false, "remove a node that is not drained, or whose removal leaves a group without a majority reachable")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "return once the removal is recorded, without waiting for the new replicas to catch up")
	return cmd
}

// waitReplaced shows how many of the groups a removal placed again have caught up, as the node
// asked knows it, until every new replica has and the node leads no group whose Raft
// configuration still differs from its placement; it gives up when nothing changes for
// removeStall.
func (a *app) waitReplaced(cmd *cobra.Command, addr, node string, groups int) error {
	last, lastChange := -1, time.Now()
	for {
		var m membersAnswer
		if err := a.adminHTTP(cmd.Context(), addr, http.MethodGet, membersAPI, &m); err != nil {
			return err
		}
		left := m.JoiningGroups + m.UnsettledHere
		if left != last {
			last, lastChange = left, time.Now()
			if !a.json && left > 0 {
				done := max(groups-m.JoiningGroups, 0)
				if err := a.printf("%d of %d queue %s caught up on their new replicas\n", done, groups, plural(groups, "group", "groups")); err != nil {
					return err
				}
			}
		}
		if left == 0 {
			if a.json {
				return a.printJSON(removeRow{NodeID: node, Groups: groups, CaughtUp: true})
			}
			return a.printf("done: every queue group node %s replicated has caught up on its new replica\n", node)
		}
		if time.Since(lastChange) > removeStall {
			return fmt.Errorf("%d queue %s still catching up after %v without progress: a group with no leader (its other replicas down) "+
				"cannot send its state; the removal goes on", m.JoiningGroups, plural(m.JoiningGroups, "group", "groups"), removeStall)
		}
		select {
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		case <-time.After(removePoll):
		}
	}
}

// printMembers prints the members as a table, then the removed nodes and removals in progress.
func (a *app) printMembers(m *membersAnswer) error {
	if err := a.printf("%-8s  %-11s  %-8s  %s\n", "NODE", "STATE", "DRAINING", "ADDRESS"); err != nil {
		return err
	}
	for _, n := range m.Members {
		state := "up"
		if !n.Up {
			state = "unreachable"
		}
		if err := a.printf("%-8s  %-11s  %-8v  %s\n", n.ID, state, n.Draining, n.Advertise); err != nil {
			return err
		}
	}
	if err := a.printRemovals(m); err != nil {
		return err
	}
	if m.JoiningGroups > 0 {
		return a.printf("catching up: %d new %s in %d queue %s\n", m.JoiningReplicas, plural(m.JoiningReplicas, "replica", "replicas"),
			m.JoiningGroups, plural(m.JoiningGroups, "group", "groups"))
	}
	return nil
}

// printRemovals prints each removed node: "removing (N groups left)" while a group's Raft
// configuration may still hold it, "removed (ID free)" once a new node may take its ID. A server
// that does not tell the groups left (an older one) gets the list of removed IDs.
func (a *app) printRemovals(m *membersAnswer) error {
	if len(m.Removals) == 0 {
		if len(m.Removed) > 0 {
			return a.printf("removed: %v\n", m.Removed)
		}
		return nil
	}
	for _, r := range m.Removals {
		state := "removed (ID free)"
		if !r.IDFree {
			state = fmt.Sprintf("removing (%d %s left)", r.GroupsLeft, plural(r.GroupsLeft, "group", "groups"))
		}
		if err := a.printf("%-8s  %s\n", r.ID, state); err != nil {
			return err
		}
	}
	return nil
}
