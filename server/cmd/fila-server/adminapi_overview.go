package main

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/internal/buildinfo"
)

// The node at a glance and the cluster:
//
//	GET /api/v1/overview  counts over the queues the caller may see
//	GET /api/v1/cluster   GetClusterStatus and the members (superadmin)

// dlqSuffix ends the name of every dead-letter queue (a reserved suffix).
const dlqSuffix = ".dlq"

func (api *adminAPI) clusterRoutes() {
	api.mux.HandleFunc("GET "+apiPath+"overview", api.handle(api.counts.overview))
	api.mux.HandleFunc("GET "+apiPath+"cluster", api.handle(cluster))
}

// overviewJSON is the overview's answer.
type overviewJSON struct {
	NodeID  string `json:"node_id"`
	Version string `json:"version"`
	// Queues counts the queues the caller may see (dead-letter queues not among them).
	Queues int `json:"queues"`
	// Messages counts their stored messages, leased ones included; InFlight the leased ones;
	// DLQMessages the messages of their dead-letter queues.
	Messages       uint64 `json:"messages"`
	InFlight       uint64 `json:"in_flight"`
	DLQMessages    uint64 `json:"dlq_messages"`
	Authentication bool   `json:"authentication"`
	Cluster        bool   `json:"cluster"`
}

// overviewMaxAge is how old the overview's counts may be. Counting reads every queue on its
// actor (about 11 ms per 1,000 queues), so every console tab polling the overview at once shares
// one count at most this often.
const overviewMaxAge = 2 * time.Second

// queueCounts is the last count of every queue's messages, shared by the overview's callers.
type queueCounts struct {
	mu   sync.Mutex // held while counting: the callers meanwhile wait for that count
	at   time.Time
	list []broker.QueueSummary
}

func (c *queueCounts) read(b *broker.Broker) []broker.QueueSummary {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.list == nil || time.Since(c.at) >= overviewMaxAge {
		c.list, c.at = b.ListQueues(), time.Now()
	}
	return c.list
}

func (c *queueCounts) overview(b *broker.Broker, p *auth.Principal, _ *http.Request) (any, *httpError) {
	o := overviewJSON{NodeID: b.NodeID(), Version: buildinfo.Read().Version, Authentication: b.Auth().Enabled(), Cluster: b.Clustered()}
	for _, q := range c.read(b) {
		if !p.Any(q.Name) {
			continue
		}
		if strings.HasSuffix(q.Name, dlqSuffix) {
			o.DLQMessages += q.Depth + q.InFlight
			continue
		}
		o.Queues++
		o.Messages += q.Depth + q.InFlight
		o.InFlight += q.InFlight
	}
	return o, nil
}

// clusterJSON is GetClusterStatus with the members.
type clusterJSON struct {
	NodeID     string     `json:"node_id"`
	Cluster    bool       `json:"cluster"`
	MetaLeader string     `json:"meta_leader,omitempty"` // this node, for a single node
	Nodes      []nodeJSON `json:"nodes"`
	// Rebalancing is enabled, paused (until PauseEndsAt) or disabled.
	Rebalancing      string     `json:"rebalancing"`
	PauseEndsAt      *time.Time `json:"pause_ends_at,omitempty"`
	QueueLeaderships uint32     `json:"queue_leaderships"` // queues this node leads
}

type nodeJSON struct {
	ID      string `json:"id"`
	Address string `json:"address,omitempty"`
	Self    bool   `json:"self"`
}

func cluster(b *broker.Broker, p *auth.Principal, _ *http.Request) (any, *httpError) {
	if herr := superadmin(p, "the cluster's status"); herr != nil {
		return nil, herr
	}
	st := b.GetClusterStatus()
	c := clusterJSON{NodeID: b.NodeID(), Cluster: b.Clustered(), Rebalancing: st.Rebalancing.String(),
		QueueLeaderships: st.QueueLeaderships, Nodes: []nodeJSON{}}
	if st.PauseEndsAt != 0 {
		t := time.UnixMilli(int64(st.PauseEndsAt)).UTC()
		c.PauseEndsAt = &t
	}
	for _, n := range b.Nodes() {
		c.Nodes = append(c.Nodes, nodeJSON{ID: string(n.ID), Address: n.Address, Self: string(n.ID) == c.NodeID})
	}
	if !c.Cluster {
		c.MetaLeader = c.NodeID
		if len(c.Nodes) == 0 {
			c.Nodes = append(c.Nodes, nodeJSON{ID: c.NodeID, Self: true})
		}
	}
	return c, nil
}
