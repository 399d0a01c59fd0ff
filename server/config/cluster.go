package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Member is a founding member of a cluster as initial_cluster names it: its node ID and the
// address where it accepts the inter-node protocol.
type Member struct {
	ID   uint64
	Addr string
}

// Clustered reports whether c runs a node of a cluster (node_id is set) rather than a single node.
func (c *Config) Clustered() bool { return c.NodeID != 0 }

// InitialMembers returns initial_cluster's members ordered by ID (nil when it is empty or does
// not parse: Validate reports why).
func (c *Config) InitialMembers() []Member {
	m, err := ParseInitialCluster(c.InitialCluster)
	if err != nil {
		return nil
	}
	return m
}

// ParseInitialCluster parses "ID=HOST:PORT,ID=HOST:PORT,…" into its members ordered by ID. Every
// problem is reported, one line each: an entry that is not ID=HOST:PORT, an ID that is not an
// integer of 1 or more, two members with one ID or one address, a count other than 1, 3 or 5.
func ParseInitialCluster(s string) ([]Member, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var errs []error
	var out []Member
	byID, byAddr := map[uint64]string{}, map[string]uint64{}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		idText, addr, ok := strings.Cut(entry, "=")
		if entry == "" || !ok {
			errs = append(errs, fmt.Errorf("initial_cluster: entry %d %q is not ID=HOST:PORT", i+1, entry))
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSpace(idText), 10, 64)
		if err != nil || id == 0 {
			errs = append(errs, fmt.Errorf("initial_cluster: %q: the node ID %q is not an integer of 1 or more", entry, idText))
			continue
		}
		addr = strings.TrimSpace(addr)
		if err := checkAddr(addr, false); err != nil {
			errs = append(errs, fmt.Errorf("initial_cluster: %q: %v", entry, err))
			continue
		}
		if prev, dup := byID[id]; dup {
			errs = append(errs, fmt.Errorf("initial_cluster: two nodes have ID %d (%d=%s and %d=%s); each node's ID is its own", id, id, prev, id, addr))
			continue
		}
		if prev, dup := byAddr[addr]; dup {
			errs = append(errs, fmt.Errorf("initial_cluster: nodes %d and %d have one address %s", prev, id, addr))
			continue
		}
		byID[id], byAddr[addr] = addr, id
		out = append(out, Member{ID: id, Addr: addr})
	}
	if len(errs) == 0 && len(out) != 1 && len(out) != 3 && len(out) != 5 {
		errs = append(errs, fmt.Errorf("initial_cluster: %d founding members; give 1, 3 or 5 (they are the meta group's voters, and an even number survives no more failures than one fewer)", len(out)))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(out, func(a, b Member) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out, nil
}

// FormatMembers writes members as initial_cluster takes them: "1=HOST:PORT,2=HOST:PORT".
func FormatMembers(members []Member) string {
	parts := make([]string, len(members))
	for i, m := range members {
		parts[i] = fmt.Sprintf("%d=%s", m.ID, m.Addr)
	}
	return strings.Join(parts, ",")
}

// checkAddr checks a HOST:PORT. A listening address (listen) may leave the host out (every
// interface) and take port 0; an address another node dials needs both.
func checkAddr(addr string, listen bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not HOST:PORT", addr)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	switch {
	case err != nil:
		return fmt.Errorf("%q: the port %q is not a number from 1 to 65535", addr, port)
	case !listen && n == 0:
		return fmt.Errorf("%q: port 0 cannot be dialled", addr)
	case !listen && host == "":
		return fmt.Errorf("%q has no host", addr)
	case !listen && isUnspecified(host):
		return fmt.Errorf("%q: %s is every interface, not an address another host can reach", addr, host)
	}
	return nil
}

func isUnspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// validateCluster reports the problems with the cluster settings, one line each.
func (c *Config) validateCluster() []error {
	var errs []error
	if c.Replication < 1 {
		errs = append(errs, errors.New("replication: must be 1 or more"))
	}
	if !c.Clustered() {
		var set []string
		for _, kv := range [][2]string{{"cluster_listen", c.ClusterListen}, {"initial_cluster", c.InitialCluster}, {"join", c.Join}, {"advertise", c.Advertise},
			{"cluster_tls_cert", c.ClusterTLSCert}, {"cluster_tls_key", c.ClusterTLSKey}, {"cluster_tls_ca", c.ClusterTLSCA}} {
			if kv[1] != "" {
				set = append(set, kv[0])
			}
		}
		if len(set) > 0 {
			errs = append(errs, fmt.Errorf("%s: a cluster setting needs node_id (this node's ID, 1 or more); without node_id the server is a single node", strings.Join(set, ", ")))
		}
		return errs
	}
	if c.ClusterListen == "" {
		errs = append(errs, fmt.Errorf("cluster_listen: node %d needs it (HOST:PORT where this node accepts the inter-node protocol)", c.NodeID))
	} else if err := checkAddr(c.ClusterListen, true); err != nil {
		errs = append(errs, fmt.Errorf("cluster_listen: %v", err))
	}
	if c.InitialCluster != "" && c.Join != "" {
		errs = append(errs, errors.New("initial_cluster and join exclude each other: a founding member gives initial_cluster, a node added later join"))
	}
	if c.InitialCluster != "" {
		members, err := ParseInitialCluster(c.InitialCluster)
		if err != nil {
			errs = append(errs, err)
		} else if !slices.ContainsFunc(members, func(m Member) bool { return m.ID == c.NodeID }) {
			ids := make([]string, len(members))
			for i, m := range members {
				ids[i] = strconv.FormatUint(m.ID, 10)
			}
			errs = append(errs, fmt.Errorf("initial_cluster: node_id %d is not in it (it lists %s): a founding member lists itself, a node added later gives join instead",
				c.NodeID, strings.Join(ids, ", ")))
		}
	}
	if c.Join != "" {
		if err := checkAddr(c.Join, false); err != nil {
			errs = append(errs, fmt.Errorf("join: %v", err))
		}
	}
	if n := nonEmpty(c.ClusterTLSCert, c.ClusterTLSKey, c.ClusterTLSCA); n != 0 && n != 3 {
		errs = append(errs, errors.New("cluster_tls_cert, cluster_tls_key and cluster_tls_ca: give all three (mutual TLS between nodes) or none"))
	}
	if c.Advertise != "" {
		if err := checkAddr(c.Advertise, false); err != nil {
			errs = append(errs, fmt.Errorf("advertise: %v", err))
		}
	}
	return errs
}

func nonEmpty(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}
