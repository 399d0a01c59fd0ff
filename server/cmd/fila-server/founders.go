package main

import (
	"context"
	"sync"
	"time"

	"github.com/filamq/fila/server/config"
	"github.com/filamq/fila/server/nodelink"
)

// founderCheckTimeout bounds the question to each other founder; a founder that does not answer
// in time (not started yet, on a first start) tells nothing.
const founderCheckTimeout = 2 * time.Second

// checkFounders refuses a founding member that finds its data directory empty although the
// cluster records that it served: its directory was lost, and its replicas would answer Raft
// without the log and votes they had (docs/cluster.md, "Replacing a node that lost its disk").
// It asks every other founder at once (nodelink.CheckFounder); the ones that cannot be reached
// or do not know it — every one on the cluster's first start — tell nothing.
func checkFounders(cfg config.Config, members []config.Member, cluster string) error {
	_, clientTLS, err := linkTLS(cfg)
	if err != nil {
		return err
	}
	self := nodeName(cfg.NodeID)
	ctx, cancel := context.WithTimeout(context.Background(), founderCheckTimeout)
	defer cancel()
	type record struct {
		founder   uint64
		advertise string
	}
	var mu sync.Mutex
	var served []record
	var wg sync.WaitGroup
	for _, m := range members {
		if m.ID == cfg.NodeID {
			continue
		}
		wg.Go(func() {
			addr, ok, err := nodelink.CheckFounder(ctx, m.Addr, cluster, self, clientTLS, founderCheckTimeout)
			if err == nil && ok {
				mu.Lock()
				served = append(served, record{m.ID, addr})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(served) == 0 {
		return nil
	}
	r := served[0]
	at := ""
	if r.advertise != "" {
		at = " at " + r.advertise
	}
	return badInput("node %d: data_dir %s is empty, but node %d of cluster %s records that node %d served%s: its data directory "+
		"was lost, and a founder cannot take its place again empty (its replicas would answer Raft without the log and votes "+
		"they had). Remove it through another node (fila cluster remove %d --force), wait until fila cluster members shows it "+
		"\"removed (ID free)\", then start it on the empty directory with join (a member's cluster address) instead of initial_cluster",
		cfg.NodeID, cfg.DataDir, r.founder, cluster, cfg.NodeID, at, cfg.NodeID)
}
