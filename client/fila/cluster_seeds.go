package fila

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
)

// ErrSeeds is matched (errors.Is) by DialCluster's failures that come from the seed list itself:
// no seed answered, a seed that is not a FIBP endpoint, or seeds of different clusters.
var ErrSeeds = errors.New("fila: bad seed list")

// seedError is DialCluster's failure because of the seeds; it matches ErrSeeds and the causes.
type seedError struct {
	msg    string
	causes []error
}

func (e *seedError) Error() string        { return "fila: " + e.msg }
func (e *seedError) Unwrap() []error      { return append([]error{ErrSeeds}, e.causes...) }
func (e *seedError) Is(target error) bool { return target == ErrSeeds }

// checkSeeds dials every seed at once and checks the answers (see DialCluster), then adds the
// members the first answering seed lists to the known addresses.
func (c *Cluster) checkSeeds(ctx context.Context, seeds []string) error {
	clients := make([]*Client, len(seeds))
	errs := make([]error, len(seeds))
	var wg sync.WaitGroup
	for i, addr := range seeds {
		wg.Go(func() { clients[i], errs[i] = c.node(ctx, addr) })
	}
	wg.Wait()
	var down []string
	var downErrs []error
	for i, err := range errs {
		switch {
		case err == nil:
		case unreachable(err):
			c.log.Warn("fila: seed did not answer", "addr", seeds[i], "err", err)
			down = append(down, fmt.Sprintf("%s (%v)", seeds[i], err))
			downErrs = append(downErrs, err)
		case ctx.Err() != nil:
			return err
		default:
			return &seedError{msg: notFIBP(seeds[i], err), causes: []error{err}}
		}
	}
	if len(down) == len(seeds) {
		return &seedError{msg: "no seed answered: " + strings.Join(down, "; "), causes: downErrs}
	}
	return c.sameCluster(ctx, seeds, clients)
}

// unreachable reports a seed that could not be connected to (nothing listens, a timeout, no
// route) or that answered but cannot serve yet (NodeNotReady, AuthStateStale): not a mistake
// in the list.
func unreachable(err error) bool {
	if code, ok := ErrorCode(err); ok {
		return code == ErrNodeNotReady.Code || code == ErrAuthStateStale.Code
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// notFIBP explains the failure of a seed that was connected to and did not complete the FIBP
// handshake.
func notFIBP(addr string, err error) string {
	var fe *Error
	switch {
	case errors.Is(err, ErrHTTPServer), errors.Is(err, ErrTLSRequired), errors.Is(err, ErrTLSNotServed):
		return fmt.Sprintf("seed %s: %v", addr, err)
	case errors.As(err, &fe) && fe.Code != ErrInvalidFrame.Code:
		return fmt.Sprintf("seed %s refused the handshake: %v", addr, err)
	}
	return fmt.Sprintf("seed %s is not a Fila client (FIBP) address: it accepted the connection but did not answer the handshake (%v); is it another port of the node, such as its cluster port?", addr, err)
}

// sameCluster checks that the seeds that answered are nodes of one cluster: each one's own entry
// in its GetClusterStatus (its node ID and address) is in the first one's. A key that may not
// read the cluster's status skips the check.
func (c *Cluster) sameCluster(ctx context.Context, seeds []string, clients []*Client) error {
	var ref *ClusterStatus
	var refAddr string
	for i, cl := range clients {
		if cl == nil {
			continue
		}
		st, err := cl.GetClusterStatus(ctx)
		if err != nil {
			if code, ok := ErrorCode(err); ok && (code == ErrForbidden.Code || code == ErrUnauthorized.Code) {
				c.log.Debug("fila: the seeds' clusters cannot be compared", "addr", seeds[i], "err", err)
				return nil
			}
			c.log.Warn("fila: seed did not give its cluster's status", "addr", seeds[i], "err", err)
			continue
		}
		if ref == nil {
			ref, refAddr = st, seeds[i]
			c.mu.Lock()
			for _, n := range st.Nodes {
				if n.Addr != "" && !strings.HasPrefix(n.Addr, "0.0.0.0:") && !contains(c.addrs, n.Addr) {
					c.addrs = append(c.addrs, n.Addr)
				}
			}
			c.mu.Unlock()
			continue
		}
		if !sameMember(ref, st, cl.NodeID()) {
			return &seedError{msg: fmt.Sprintf("seeds %s and %s are nodes of different clusters: %s is node %d, and the cluster of %s has %s",
				refAddr, seeds[i], seeds[i], cl.NodeID(), refAddr, members(ref))}
		}
	}
	return nil
}

// sameMember reports whether node id, as its own status st lists it, is a member of ref: the
// same ID at the same address.
func sameMember(ref, st *ClusterStatus, id uint64) bool {
	if id == 0 {
		return false // a single node is a cluster of its own
	}
	var self string
	for _, n := range st.Nodes {
		if n.NodeID == id {
			self = n.Addr
		}
	}
	for _, n := range ref.Nodes {
		if n.NodeID == id {
			// A node records its address a moment after the cluster formed: until both lists
			// have it, the ID alone is compared.
			return n.Addr == self || n.Addr == "" || self == ""
		}
	}
	return false
}

func members(st *ClusterStatus) string {
	if len(st.Nodes) == 0 {
		return "no members (a single node)"
	}
	parts := make([]string, len(st.Nodes))
	for i, n := range st.Nodes {
		parts[i] = fmt.Sprintf("node %d at %s", n.NodeID, n.Addr)
		if n.Addr == "" {
			parts[i] = fmt.Sprintf("node %d (address not recorded yet)", n.NodeID)
		}
	}
	return strings.Join(parts, ", ")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
