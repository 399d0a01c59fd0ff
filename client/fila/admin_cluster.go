package fila

import (
	"context"
	"strconv"
	"time"

	"github.com/filamq/fila/generated/fibp"
)

// APIKey is a newly created API key. Key is the plaintext secret, returned only once.
type APIKey struct {
	ID           string `json:"key_id"`
	Key          string `json:"key"`
	IsSuperadmin bool   `json:"is_superadmin"`
}

// CreateAPIKey creates an API key; a zero expiresAt means it never expires.
func (c *Client) CreateAPIKey(ctx context.Context, name string, expiresAt time.Time, superadmin bool) (*APIKey, error) {
	req := &fibp.CreateAPIKey{Name: name, IsSuperadmin: superadmin}
	if !expiresAt.IsZero() {
		req.ExpiresAtMs = uint64(expiresAt.UnixMilli())
	}
	res, err := roundTrip[fibp.CreateAPIKeyResult](ctx, c, req)
	if err != nil {
		return nil, err
	}
	if err := resultError(res.ErrorCode, "API key "+strconv.Quote(name)); err != nil {
		return nil, err
	}
	return &APIKey{ID: res.KeyID, Key: res.Key, IsSuperadmin: res.IsSuperadmin}, nil
}

func keySubject(id string) string { return "API key " + strconv.Quote(id) }

// RevokeAPIKey revokes an API key.
func (c *Client) RevokeAPIKey(ctx context.Context, keyID string) error {
	res, err := roundTrip[fibp.RevokeAPIKeyResult](ctx, c, &fibp.RevokeAPIKey{KeyID: keyID})
	if err != nil {
		return err
	}
	return resultError(res.ErrorCode, keySubject(keyID))
}

// APIKeyInfo describes an API key (never its secret).
type APIKeyInfo struct {
	ID           string    `json:"key_id"`
	Name         string    `json:"name"`
	CreatedAt    time.Time `json:"created_at,omitzero"`
	ExpiresAt    time.Time `json:"expires_at,omitzero"` // zero = never
	IsSuperadmin bool      `json:"is_superadmin"`
}

// ListAPIKeys lists every API key.
func (c *Client) ListAPIKeys(ctx context.Context) ([]APIKeyInfo, error) {
	res, err := roundTrip[fibp.ListAPIKeysResult](ctx, c, &fibp.ListAPIKeys{})
	if err != nil {
		return nil, err
	}
	if err := resultError(res.ErrorCode, "list API keys"); err != nil {
		return nil, err
	}
	out := make([]APIKeyInfo, len(res.Keys))
	for i, k := range res.Keys {
		out[i] = APIKeyInfo{ID: k.KeyID, Name: k.Name, CreatedAt: msTime(k.CreatedAtMs),
			ExpiresAt: msTime(k.ExpiresAtMs), IsSuperadmin: k.IsSuperadmin}
	}
	return out, nil
}

// Permission grants Kind (PermissionProduce, PermissionConsume or PermissionAdmin) on the queues
// matching the glob Pattern, or Kind PermissionThrottle (Fila's addition: declaring and reading a
// throttle) on the throttles whose names match it.
type Permission struct {
	Kind    string `json:"kind"`
	Pattern string `json:"pattern"`
}

// ACL is an API key's permission set.
type ACL struct {
	KeyID        string       `json:"key_id"`
	IsSuperadmin bool         `json:"is_superadmin"`
	Permissions  []Permission `json:"permissions"`
}

// SetACL replaces an API key's permissions (it does not merge).
func (c *Client) SetACL(ctx context.Context, keyID string, perms []Permission) error {
	req := &fibp.SetACL{KeyID: keyID, Permissions: make([]fibp.ACLPermission, len(perms))}
	for i, p := range perms {
		req.Permissions[i] = fibp.ACLPermission(p)
	}
	res, err := roundTrip[fibp.SetACLResult](ctx, c, req)
	if err != nil {
		return err
	}
	return resultError(res.ErrorCode, keySubject(keyID))
}

// GetACL reads an API key's permissions.
func (c *Client) GetACL(ctx context.Context, keyID string) (*ACL, error) {
	res, err := roundTrip[fibp.GetACLResult](ctx, c, &fibp.GetACL{KeyID: keyID})
	if err != nil {
		return nil, err
	}
	if err := resultError(res.ErrorCode, keySubject(keyID)); err != nil {
		return nil, err
	}
	acl := &ACL{KeyID: res.KeyID, IsSuperadmin: res.IsSuperadmin, Permissions: make([]Permission, len(res.Permissions))}
	for i, p := range res.Permissions {
		acl.Permissions[i] = Permission(p)
	}
	return acl, nil
}

func throttleSubject(name string) string { return "throttle " + strconv.Quote(name) }

// GetThrottleStats returns a throttle's statistics with its topBuckets most-waiting buckets.
// The result is the decoded frame; its Summary, Buckets and times are as on the wire.
func (c *Client) GetThrottleStats(ctx context.Context, name string, topBuckets uint32) (*ThrottleStats, error) {
	res, err := roundTrip[fibp.GetThrottleStatsResult](ctx, c, &fibp.GetThrottleStats{Name: name, TopBuckets: topBuckets})
	if err != nil {
		return nil, err
	}
	return res, resultError(res.ErrorCode, throttleSubject(name))
}

// GetThrottleBucket returns one bucket of a throttle, named by its kind and key values.
func (c *Client) GetThrottleBucket(ctx context.Context, name string, kind BucketKind, values []string) (*BucketStats, error) {
	res, err := roundTrip[fibp.GetThrottleBucketResult](ctx, c, &fibp.GetThrottleBucket{Name: name, BucketKind: kind, Values: values})
	if err != nil {
		return nil, err
	}
	if err := resultError(res.ErrorCode, throttleSubject(name)); err != nil {
		return nil, err
	}
	return &res.Bucket, nil
}

// GetRoutes returns which node leads each of queues (none = every queue), and each shard when
// sharded. The answer may be slightly stale.
func (c *Client) GetRoutes(ctx context.Context, queues ...string) ([]RouteEntry, error) {
	req := &fibp.GetRoutes{Queues: make([]fibp.QueueRef, len(queues))}
	for i, q := range queues {
		req.Queues[i] = fibp.QueueRef{Queue: q}
	}
	res, err := roundTrip[fibp.GetRoutesResult](ctx, c, req)
	if err != nil {
		return nil, err
	}
	if err := resultError(res.ErrorCode, "get routes"); err != nil {
		return nil, err
	}
	return res.Entries, nil
}

func nodeSubject(id uint64) string { return "node " + strconv.FormatUint(id, 10) }

// DrainNode moves every leadership off a node (drain = true), or cancels a drain.
func (c *Client) DrainNode(ctx context.Context, nodeID uint64, drain bool) error {
	res, err := roundTrip[fibp.DrainNodeResult](ctx, c, &fibp.DrainNode{NodeID: nodeID, Drain: drain})
	if err != nil {
		return err
	}
	return resultError(res.ErrorCode, nodeSubject(nodeID))
}

// MoveQueueLeader moves one queue's leadership to a member node of its group.
func (c *Client) MoveQueueLeader(ctx context.Context, queue string, targetNodeID uint64) error {
	res, err := roundTrip[fibp.MoveQueueLeaderResult](ctx, c, &fibp.MoveQueueLeader{Queue: queue, TargetNodeID: targetNodeID})
	if err != nil {
		return err
	}
	switch res.ErrorCode {
	case fibp.CodeNodeNotFound:
		return resultError(res.ErrorCode, nodeSubject(targetNodeID)+" (as a member of "+queueSubject(queue)+")")
	}
	return resultError(res.ErrorCode, queueSubject(queue))
}

// SetRebalancing enables, pauses (for pause) or disables automatic leadership rebalancing.
func (c *Client) SetRebalancing(ctx context.Context, mode RebalancingMode, pause time.Duration) error {
	res, err := roundTrip[fibp.SetRebalancingResult](ctx, c, &fibp.SetRebalancing{Mode: mode, PauseMs: durationMs(pause)})
	if err != nil {
		return err
	}
	return resultError(res.ErrorCode, "set rebalancing")
}

// ClusterStatus is the answer to GetClusterStatus.
type ClusterStatus struct {
	MetaLeaderNodeID       uint64          `json:"meta_leader_node_id"`
	Rebalancing            RebalancingMode `json:"rebalancing"`
	RebalancingPauseEndsAt time.Time       `json:"rebalancing_pause_ends_at,omitzero"` // zero unless paused
	Nodes                  []NodeStatus    `json:"nodes"`
}

// NodeStatus describes one cluster node.
type NodeStatus struct {
	NodeID           uint64    `json:"node_id"`
	Addr             string    `json:"addr"`
	State            NodeState `json:"state"`
	QueueLeaderships uint32    `json:"queue_leaderships"`
}

// GetClusterStatus returns the nodes, the meta leader and the rebalancing state.
func (c *Client) GetClusterStatus(ctx context.Context) (*ClusterStatus, error) {
	res, err := roundTrip[fibp.GetClusterStatusResult](ctx, c, &fibp.GetClusterStatus{})
	if err != nil {
		return nil, err
	}
	if err := resultError(res.ErrorCode, "cluster status"); err != nil {
		return nil, err
	}
	st := &ClusterStatus{
		MetaLeaderNodeID:       res.MetaLeaderNodeID,
		Rebalancing:            res.Rebalancing,
		RebalancingPauseEndsAt: msTime(res.RebalancingPauseEndsAt),
		Nodes:                  make([]NodeStatus, len(res.Nodes)),
	}
	for i, n := range res.Nodes {
		st.Nodes[i] = NodeStatus(n)
	}
	return st, nil
}
