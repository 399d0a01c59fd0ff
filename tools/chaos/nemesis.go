package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/filamq/fila/client/fila"
)

// Nemesis injects faults. Inject starts one fault and returns what it did and how to heal it;
// heal must leave every node serving again (a killed node restarted, a paused one continued, a
// partition healed). Inject and heal are called from one goroutine, never concurrently.
type Nemesis interface {
	Inject(rng *rand.Rand) (what string, heal func() error, err error)
}

// KillRestart kills a random node with SIGKILL (kill -9); heal restarts it on the same data
// directory and address. BeforeRestart, when set, runs between the two with the node down (a
// test drops the unsynced writes of a fault-injecting file system there: a power cut).
type KillRestart struct {
	Cluster       *Cluster
	BeforeRestart func(*Node) error
}

func (k KillRestart) Inject(rng *rand.Rand) (string, func() error, error) {
	n := k.Cluster.Nodes[rng.IntN(len(k.Cluster.Nodes))]
	n.Kill()
	return fmt.Sprintf("kill -9 node %d", n.ID), func() error {
		if k.BeforeRestart != nil {
			if err := k.BeforeRestart(n); err != nil {
				return err
			}
		}
		return n.Start()
	}, nil
}

// KillShardLeader kills with SIGKILL the node that leads a random shard of Queue, as a node's
// GetRoutes names it (a random node when no node answers one); heal restarts it.
type KillShardLeader struct {
	Cluster *Cluster
	Queue   string
}

func (k KillShardLeader) Inject(rng *rand.Rand) (string, func() error, error) {
	n, shard := k.leader(rng)
	what := fmt.Sprintf("kill -9 node %d", n.ID)
	if shard >= 0 {
		what += fmt.Sprintf(" (leader of shard %d)", shard)
	}
	n.Kill()
	return what, n.Start, nil
}

// leader is the node that leads a random shard, and the shard (-1: no node said; a random node).
func (k KillShardLeader) leader(rng *rand.Rand) (*Node, int) {
	nodes := k.Cluster.Nodes
	for _, i := range rng.Perm(len(nodes)) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		routes, err := routesOf(ctx, nodes[i].Addr, k.Queue)
		cancel()
		if err != nil || len(routes) != 1 || len(routes[0].Shards) == 0 {
			continue
		}
		shards := routes[0].Shards
		for _, j := range rng.Perm(len(shards)) {
			for _, n := range nodes {
				if n.Addr == shards[j].LeaderAddr && n.Running() {
					return n, int(shards[j].ShardIndex)
				}
			}
		}
	}
	return nodes[rng.IntN(len(nodes))], -1
}

// routesOf asks the node at addr where queue's shards are led.
func routesOf(ctx context.Context, addr, queue string) ([]fila.RouteEntry, error) {
	c, err := fila.Dial(ctx, addr, &fila.Options{DialTimeout: time.Second})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.GetRoutes(ctx, queue)
}

// Pause stops a random node with SIGSTOP; heal continues it with SIGCONT.
type Pause struct{ Cluster *Cluster }

func (p Pause) Inject(rng *rand.Rand) (string, func() error, error) {
	n := p.Cluster.Nodes[rng.IntN(len(p.Cluster.Nodes))]
	if err := n.Pause(); err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("SIGSTOP node %d", n.ID), n.Resume, nil
}

// Partition isolates a random node from the others through Cut(node, others) and heals with
// Heal(node, others): the callbacks reach whatever injects the partition (the inter-node
// link's fault seam, network namespaces).
type Partition struct {
	Nodes []int
	Cut   func(node int, others []int) error
	Heal  func(node int, others []int) error
}

func (p Partition) Inject(rng *rand.Rand) (string, func() error, error) {
	if len(p.Nodes) < 2 {
		return "", nil, errors.New("chaos: a partition needs two nodes or more")
	}
	i := rng.IntN(len(p.Nodes))
	node := p.Nodes[i]
	others := append(append([]int(nil), p.Nodes[:i]...), p.Nodes[i+1:]...)
	if err := p.Cut(node, others); err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("partition node %d from %v", node, others), func() error { return p.Heal(node, others) }, nil
}

// Mix injects one of its nemeses, chosen at random each time.
type Mix []Nemesis

func (m Mix) Inject(rng *rand.Rand) (string, func() error, error) {
	return m[rng.IntN(len(m))].Inject(rng)
}

// Schedule runs a nemesis: it waits a random time up to Every, injects a fault, holds it for a
// random time between Hold/2 and Hold, heals it, and so on until ctx ends (a fault in progress
// is healed first). Each fault is recorded in the history as a Fault op from injection to heal.
type Schedule struct {
	Nemesis Nemesis
	Every   time.Duration
	Hold    time.Duration
	Seed    uint64
}

// Run returns the first error of an injection or a heal (a node that would not restart).
func (s Schedule) Run(ctx context.Context, rec *Recorder) error {
	rng := rand.New(rand.NewPCG(s.Seed, s.Seed+1))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(randBetween(rng, s.Every/2, s.Every)):
		}
		start := rec.Now()
		what, heal, err := s.Nemesis.Inject(rng)
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(randBetween(rng, s.Hold/2, s.Hold)):
		}
		err = heal()
		op := Op{Client: -1, Kind: Fault, Value: what, Outcome: Ok, Invoke: start, Complete: rec.Now()}
		if err != nil {
			op.Outcome, op.Err = Fail, err.Error()
		}
		rec.Add(op)
		if err != nil {
			return fmt.Errorf("healing %s: %w", what, err)
		}
	}
}

func randBetween(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}
