package broker

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/raftgroup"
)

// Removing a member (RemoveNode, the admin API's cluster/members/{id}/remove). The meta state
// decides what a removal does (meta.RemoveMember: the member leaves, each group it replicated gets
// another member, recorded as joining); every node then carries out its share, in a membership
// worker that looks every memberTick:
//
//   - a joining replica starts empty, outside its group's Raft configuration (raftgroup's Join,
//     openGroup), and is added to it by the group's leader as a non-voter, which sends it the
//     group's log or a snapshot (its state and its messages' bodies), as to a replica that was
//     down long; once it has applied every entry its leader told it committed
//     (raftgroup.Current) — or fell asleep on the leader's Hibernate entry, which it applies only
//     as its log's last — it proposes ReplicaCaughtUp;
//   - the leader of a group makes a caught-up replica a voter, and only once every replica the
//     placement names is a voter takes the servers it does not name (the removed node) out of the
//     configuration, then records it out (ReplicaLeft, replace.go). A sleeping group with a
//     joining replica, or one still holding a removed node, is woken so that it has a leader;
//   - a member added tops up the groups short of replicas (meta's PutMember): its replicas join as
//     a re-placed one does;
//   - the meta group's leader takes removed nodes out of the meta group's configuration (and
//     records it, ReplicaLeft), and, when that leaves an even number of voters, makes a non-voting
//     member a voter (3 or 5 voters stay 3 or 5 while a non-voter is there to take the place);
//   - the removed node, if it still runs, closes the replicas it no longer hosts as it applies the
//     removal (the registry), and stops: Removed is closed, and fila-server exits with a log line.

// Timing of the membership worker: how often it looks, how long a configuration change may take,
// how many groups it changes at once, and how long it leaves a group whose change failed.
const (
	memberTick     = 500 * time.Millisecond
	memberTimeout  = 10 * time.Second
	memberParallel = 4
	memberRetry    = 2 * time.Second
)

// memberWorker carries out this node's share of removals; nil on a single node.
type memberWorker struct {
	b     *Broker
	nudge chan struct{}

	removedOnce sync.Once
	removed     chan struct{} // closed once the meta state says this node was removed

	active bool // a removal or a top-up was seen: groups' configurations are looked at (pass's goroutine)

	mu     sync.Mutex
	failed map[string]time.Time // group → when its last change, or ReplicaCaughtUp, failed or was sent
	// settled: group → the placement (placementKey) its Raft configuration was last found to
	// match. Only the group's leader changes it, and only to follow a placement that changed, so
	// a group whose placement is the one it was found settled with needs no look.
	settled map[string]string
}

func newMemberWorker(b *Broker) *memberWorker {
	return &memberWorker{b: b, nudge: make(chan struct{}, 1), removed: make(chan struct{}), failed: map[string]time.Time{},
		settled: map[string]string{}}
}

// Removed is closed once this node was removed from its cluster (nil on a single node, never
// closed): it hosts nothing any more and should stop.
func (b *Broker) Removed() <-chan struct{} {
	if b.members == nil {
		return nil
	}
	return b.members.removed
}

// MemberRemoved hears a removal (meta.MemberWatcher): the worker looks at once.
func (h *metaHooks) MemberRemoved(id meta.NodeID) {
	if h.live.Load() && h.b.members != nil {
		if id == h.b.nodeID() && h.b.selfRemoved(h.b.catalog()) {
			h.b.log.Error("this node was removed from the cluster (RemoveMember): it hosts no queue and stops serving", "node_id", string(id))
		}
		signal(h.b.members.nudge)
	}
}

// run looks whenever poked, and every memberTick, until the broker closes.
func (w *memberWorker) run() {
	t := time.NewTicker(memberTick)
	defer t.Stop()
	for {
		w.pass()
		select {
		case <-w.b.stopWatch:
			return
		case <-w.nudge:
		case <-t.C:
		}
	}
}

// pass carries out what this node can of the removals now.
func (w *memberWorker) pass() {
	b, cat, self := w.b, w.b.catalog(), w.b.nodeID()
	if b.selfRemoved(cat) {
		w.removedOnce.Do(func() { close(w.removed) })
		return
	}
	if g := b.metaGroupNow(); g != nil && g.Leader() {
		b.settleMeta(g, cat)
	}
	if !w.active {
		joining, _ := cat.Joining()
		if len(cat.RemovedNodes()) == 0 && joining == 0 {
			return // no removal ever, no top-up: every group's configuration is its placement
		}
		w.active = true // from now on, a configuration may differ from its placement (a non-voter to promote)
	}
	var settle []func() error
	open := b.actors()
	w.retryJoining(cat, open)
	for name, a := range open {
		asg, ok := cat.Assignment(name)
		if !ok || asg.Name() != name || !asg.Has(self) || !w.due(name) {
			continue
		}
		switch {
		case slices.Contains(asg.Joining, self):
			settle = append(settle, func() error { return w.reportCaughtUp(name, a) })
		case a.leadingNow.Load() && (!w.settledAs(name, &asg) || len(asg.Leaving) > 0):
			settle = append(settle, func() error {
				done, err := b.settleGroup(name, a, &asg)
				if done {
					w.markSettled(name, &asg)
					if len(asg.Leaving) > 0 {
						return w.reportLeft(name, a, asg.Leaving)
					}
				}
				return err
			})
		case len(asg.Joining) > 0 || len(asg.Leaving) > 0:
			// A sleeping group: woken, it elects a leader, which adds the joining replica and takes
			// the removed node out of its configuration.
			a.poke()
		}
	}
	eachAtOnce(len(settle), memberParallel, func(i int) error { return settle[i]() })
}

// due reports whether group may be worked on now (its last failure, or caught-up report, is
// memberRetry old).
func (w *memberWorker) due(group string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.failed[group]
	return !ok || time.Since(at) >= memberRetry
}

// placementKey identifies a group's placement: its replicas and the joining ones.
func placementKey(asg *meta.Assignment) string {
	return fmt.Sprint(asg.Replicas, asg.Joining)
}

// settledAs reports whether group's configuration was found settled with asg's placement.
func (w *memberWorker) settledAs(group string, asg *meta.Assignment) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	k, ok := w.settled[group]
	return ok && k == placementKey(asg)
}

// markSettled records that group's configuration matches asg's placement.
func (w *memberWorker) markSettled(group string, asg *meta.Assignment) {
	w.mu.Lock()
	w.settled[group] = placementKey(asg)
	w.mu.Unlock()
}

// hold leaves group alone for memberRetry.
func (w *memberWorker) hold(group string) {
	w.mu.Lock()
	w.failed[group] = time.Now()
	w.mu.Unlock()
}

// reportCaughtUp proposes ReplicaCaughtUp for this node's joining replica of group once it has
// caught up with the group's leader.
func (w *memberWorker) reportCaughtUp(group string, a *actor) error {
	caught := a.asleep(func(*summary) {}) // it applied the leader's Hibernate as its last entry
	if !caught {
		g := groupNow(a)
		caught = g != nil && inConfiguration(g, w.b.nodeID()) && g.Current()
	}
	if !caught {
		return nil
	}
	w.hold(group) // one report per memberRetry: the state says when it was applied
	w.b.adminMu.Lock()
	err := w.b.proposeMeta(meta.ReplicaCaughtUp(group, w.b.nodeID()))
	w.b.adminMu.Unlock()
	if err != nil {
		w.b.log.Warn("reporting a replica caught up failed; retrying", "queue", group, "err", err)
		return err
	}
	w.b.log.Info("a new replica caught up with its queue's leader", "queue", group)
	return nil
}

// groupNow is a's Raft group, read on its goroutine; nil when it has none or does not answer.
func groupNow(a *actor) *raftgroup.Group {
	ch := make(chan *raftgroup.Group, 1)
	a.post(func(a *actor) { ch <- a.g })
	select {
	case g := <-ch:
		return g
	case <-time.After(memberTimeout):
		return nil
	}
}

// settleGroup brings the Raft configuration of group, which this node leads, in line with its
// placement: a replica missing from it is added as a non-voter, a caught-up non-voter is made a
// voter, and once every replica is a voter the servers the placement no longer names are taken
// out. It reports whether the configuration is the placement's (then or now).
func (b *Broker) settleGroup(group string, a *actor, asg *meta.Assignment) (bool, error) {
	var g *raftgroup.Group
	if !a.call(func(a *actor) { g = a.g }) || g == nil {
		return false, nil // no longer leading
	}
	servers, err := g.Members()
	if err != nil {
		return false, err
	}
	if settled(servers, asg) {
		return true, nil
	}
	net := b.opts.Cluster.Network
	voters := true
	for _, id := range asg.Replicas {
		s, in := findServer(servers, id)
		joining := slices.Contains(asg.Joining, id)
		switch {
		case !in:
			if err := g.AddNonvoter(raft.ServerID(id), net.Address(id, group), memberTimeout); err != nil {
				return false, b.memberFailed(group, err)
			}
			b.log.Info("added a new replica to a queue's group; it catches up", "queue", group, "node_id", string(id))
			voters = false
		case s.Suffrage == raft.Voter:
		case joining:
			voters = false
		default:
			if err := g.AddVoter(s.ID, s.Address, memberTimeout); err != nil {
				return false, b.memberFailed(group, err)
			}
			b.log.Info("a caught-up replica votes in its queue's group", "queue", group, "node_id", string(id))
		}
	}
	if !voters {
		return false, nil
	}
	for _, s := range servers {
		if asg.Has(meta.NodeID(s.ID)) {
			continue
		}
		if err := g.RemoveServer(s.ID, memberTimeout); err != nil {
			return false, b.memberFailed(group, err)
		}
		b.log.Info("took a removed node's replica out of a queue's group", "queue", group, "node_id", string(s.ID))
	}
	return true, nil
}

// memberFailed logs a configuration change of group that failed and has the worker leave the
// group alone for memberRetry.
func (b *Broker) memberFailed(group string, err error) error {
	if !leadershipLost(err) {
		b.log.Warn("changing a queue group's members failed; retrying", "queue", group, "err", err)
	}
	b.members.hold(group)
	return err
}

// settleMeta takes removed nodes out of the meta group's configuration, which this node leads,
// and keeps its voters odd when a non-voting member can take a removed voter's place.
func (b *Broker) settleMeta(g *raftgroup.Group, cat *meta.Catalog) {
	servers, err := g.Members()
	if err != nil {
		return
	}
	b.reportMetaLeft(g, cat, servers)
	voters := 0
	for _, s := range servers {
		if cat.Removed(meta.NodeID(s.ID)) {
			if err := g.RemoveServer(s.ID, memberTimeout); err != nil {
				b.log.Warn("taking a removed node out of the meta group failed; retrying", "node_id", string(s.ID), "err", err)
			} else {
				b.log.Info("took a removed node out of the meta group", "node_id", string(s.ID))
			}
			return // the next pass looks at the configuration that results
		}
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	if voters%2 != 0 {
		return
	}
	for _, s := range servers {
		id := meta.NodeID(s.ID)
		if n, ok := cat.Node(id); s.Suffrage == raft.Voter || !ok || n.Draining || !b.reachable(id) {
			continue
		}
		if err := g.AddVoter(s.ID, s.Address, memberTimeout); err != nil {
			b.log.Warn("making a member a voter of the meta group failed; retrying", "node_id", string(id), "err", err)
		} else {
			b.log.Info("a member took a removed voter's place in the meta group", "node_id", string(id))
		}
		return
	}
}

// findServer is id's server in servers.
func findServer(servers []raft.Server, id meta.NodeID) (raft.Server, bool) {
	for _, s := range servers {
		if s.ID == raft.ServerID(id) {
			return s, true
		}
	}
	return raft.Server{}, false
}

// reachable reports whether node id is up as this node sees it: itself, or a node its link is
// connected to.
func (b *Broker) reachable(id meta.NodeID) bool {
	conn, ok := b.opts.Cluster.Network.(peerStates)
	return id == b.nodeID() || !ok || conn.Connected(id)
}

// joiningHere reports whether this node's replica of group is joining it (meta.Assignment's
// Joining): it starts empty, outside the group's configuration, and is sent its state.
func (b *Broker) joiningHere(group string) bool {
	if !b.clustered() {
		return false
	}
	a, ok := b.catalog().Assignment(group)
	return ok && a.Name() == group && slices.Contains(a.Joining, b.nodeID())
}

// joiningRoleTimeout bounds how long a joining replica's open waits for its group's leader to add
// it: a group whose every other replica is lost never gets one, and the open holds the group's
// next change (a DeleteQueue) until it gives up. The worker opens it again (retryJoining).
const joiningRoleTimeout = 5 * time.Second

// roleTimeout is how long the replica of group waits, as it opens, for its role to settle.
func (b *Broker) roleTimeout(group string) time.Duration {
	if b.joiningHere(group) {
		return joiningRoleTimeout
	}
	return leadTimeout
}

// retryJoining has the registry open again, every memberRetry, this node's joining replicas
// whose open gave up (no leader added them in time).
func (w *memberWorker) retryJoining(cat *meta.Catalog, open map[string]*actor) {
	for _, a := range cat.AssignmentsFor(w.b.nodeID()) {
		key := "open " + a.Name() // no queue name has a space
		if _, ok := open[a.Name()]; ok || !slices.Contains(a.Joining, w.b.nodeID()) || !w.due(key) {
			continue
		}
		w.hold(key)
		w.b.reg.Assign(a)
	}
}

// RemovalRefused is a removal the node refused: Reason is "not_a_cluster", "node_not_found",
// "self" (the node asked is the one to remove), "node_not_drained", "quorum" or "last_member".
type RemovalRefused struct {
	Reason  string
	Message string
}

func (e *RemovalRefused) Error() string { return e.Message }

// Removal is what a removal did.
type Removal struct {
	Node string
	// Groups counts the queue groups the node replicated, each placed again on another member.
	Groups int
}

// RemoveNode removes member id from the cluster (meta.RemoveMember). Unless force, it refuses a
// node that is not draining, and a removal that would leave the meta group, or a queue group the
// node replicates, without a majority of its voters reachable from here. The answer comes once
// the removal is applied here; the new replicas catch up after (MembershipStatus).
func (b *Broker) RemoveNode(id string, force bool) (Removal, error) {
	if !b.clustered() {
		return Removal{}, &RemovalRefused{"not_a_cluster", "this server is a single node, not a node of a cluster: there is no member to remove"}
	}
	cat, nid := b.catalog(), meta.NodeID(id)
	n, ok := cat.Node(nid)
	switch {
	case !ok && cat.Removed(nid):
		return Removal{}, &RemovalRefused{"node_not_found", fmt.Sprintf("node %s was removed from the cluster already", id)}
	case !ok:
		return Removal{}, &RemovalRefused{"node_not_found", fmt.Sprintf("no node of the cluster has the ID %q", id)}
	case nid == b.nodeID():
		return Removal{}, &RemovalRefused{"self", fmt.Sprintf(
			"node %s is the node asked: ask another node of the cluster to remove it (a removed node stops, and could not show the removal's progress)", id)}
	case !force && !n.Draining:
		return Removal{}, &RemovalRefused{"node_not_drained", fmt.Sprintf(
			"node %s is not drained: drain it first (fila cluster drain %s), or remove it with --force if it is lost for good", id, id)}
	}
	if !force {
		if msg := b.removalLosesQuorum(cat, nid); msg != "" {
			return Removal{}, &RemovalRefused{"quorum", msg + "; bring the unreachable nodes back first, or remove it with --force"}
		}
	}
	groups := len(cat.AssignmentsFor(nid))
	deadline := time.Now().Add(drainProposeWait)
	for {
		b.adminMu.Lock()
		err := b.proposeMeta(meta.RemoveMember(nid, force))
		b.adminMu.Unlock()
		var r *meta.Refused
		switch {
		case err == nil:
			b.log.Info("removed a node from the cluster", "node_id", id, "groups_placed_again", groups, "force", force)
			return Removal{Node: id, Groups: groups}, nil
		case errors.As(err, &r):
			return Removal{}, &RemovalRefused{refusalReason(r.Code), r.Message}
		case time.Now().After(deadline) || b.isClosed():
			return Removal{}, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// refusalReason is RemovalRefused's Reason for what the meta state refused.
func refusalReason(c meta.Code) string {
	switch c {
	case meta.CodeNodeNotDrained:
		return "node_not_drained"
	case meta.CodeLastMember:
		return "last_member"
	}
	return "node_not_found"
}

// removalLosesQuorum says why removing id would leave a group without a majority of its voters
// reachable from here ("" when it would not): the meta group when id votes in it, and each queue
// group it replicates, whose new replica does not count until it has caught up.
func (b *Broker) removalLosesQuorum(cat *meta.Catalog, id meta.NodeID) string {
	if g := b.metaGroupNow(); g != nil {
		if servers, err := g.Members(); err == nil {
			if s, ok := findServer(servers, id); ok && s.Suffrage == raft.Voter {
				rest, up := 0, 0
				for _, s := range servers {
					if s.Suffrage == raft.Voter && s.ID != raft.ServerID(id) {
						rest++
						if b.reachable(meta.NodeID(s.ID)) {
							up++
						}
					}
				}
				if need := rest/2 + 1; up < need {
					return fmt.Sprintf("removing node %s would leave the meta group with %d of its %d other voters reachable, fewer than its quorum of %d", id, up, rest, need)
				}
			}
		}
	}
	for _, a := range cat.AssignmentsFor(id) {
		up := 0
		for _, r := range a.Replicas {
			if r != id && !slices.Contains(a.Joining, r) && b.reachable(r) {
				up++
			}
		}
		if need := len(a.Replicas)/2 + 1; up < need {
			return fmt.Sprintf("removing node %s would leave queue %q with %d of its %d replicas reachable and caught up, fewer than a majority (%d)",
				id, a.Name(), up, len(a.Replicas), need)
		}
	}
	return ""
}

// MemberState is a member as MembershipStatus shows it.
type MemberState struct {
	ID, Address, Advertise string
	Draining, Up           bool
	// MetaVoter: the meta group's configuration, as this node knows it, counts the member a voter.
	MetaVoter bool
}

// RemovalState is a removed node: GroupsLeft counts the groups (the meta group among them) whose
// Raft configuration may still hold it; 0 once its ID is free.
type RemovalState struct {
	ID         string
	GroupsLeft int
}

// MembershipStatus is the cluster's membership as this node sees it, with the progress of
// removals.
type MembershipStatus struct {
	Members []MemberState
	Removed []string
	// Removals are the removed nodes with the groups whose Raft configuration may still hold each
	// (meta group included); none left: the ID is free for a new node.
	Removals []RemovalState
	// JoiningReplicas counts the replicas placed by removals that have not caught up yet, in
	// JoiningGroups groups.
	JoiningReplicas, JoiningGroups int
	// UnsettledHere counts the groups this node leads whose Raft configuration is not yet what
	// their placement says (a new replica to add or make a voter, a removed one to take out).
	UnsettledHere int
}

// MembershipStatus describes the members and the progress of removals.
func (b *Broker) MembershipStatus() MembershipStatus {
	var st MembershipStatus
	if !b.clustered() {
		return st
	}
	cat := b.catalog()
	var metaServers []raft.Server
	if g := b.metaGroupNow(); g != nil {
		metaServers, _ = g.Members()
	}
	for _, n := range cat.Nodes() {
		s, in := findServer(metaServers, n.ID)
		st.Members = append(st.Members, MemberState{ID: string(n.ID), Address: n.Address, Advertise: n.Advertise,
			Draining: n.Draining, Up: b.reachable(n.ID), MetaVoter: in && s.Suffrage == raft.Voter})
	}
	for _, id := range cat.RemovedNodes() {
		st.Removed = append(st.Removed, string(id))
		st.Removals = append(st.Removals, RemovalState{ID: string(id), GroupsLeft: cat.Leaving(id)})
	}
	st.JoiningReplicas, st.JoiningGroups = cat.Joining()
	for name, a := range b.actors() {
		asg, ok := cat.Assignment(name)
		if !ok || asg.Name() != name || !a.leadingNow.Load() {
			continue
		}
		var g *raftgroup.Group
		if !a.call(func(a *actor) { g = a.g }) || g == nil {
			continue
		}
		if servers, err := g.Members(); err == nil && !settled(servers, &asg) {
			st.UnsettledHere++
		}
	}
	return st
}

// settled reports whether servers are exactly the group's replicas, every one a voter.
func settled(servers []raft.Server, asg *meta.Assignment) bool {
	if len(servers) != len(asg.Replicas) {
		return false
	}
	for _, s := range servers {
		if s.Suffrage != raft.Voter || !asg.Has(meta.NodeID(s.ID)) {
			return false
		}
	}
	return true
}
