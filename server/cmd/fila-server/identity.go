package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/filamq/fila/server/config"
)

// identityFile, in the data directory of a cluster node, names the node and the cluster the
// directory belongs to. It is written on the node's first start, on an empty directory, and
// checked on every start after: a directory of another node or cluster is never served. A
// single node writes none (its directory is recognised by its store).
const identityFile = "fila-node.json"

// identityFormat is the layout of identityFile this release writes and reads.
const identityFormat = 1

// nodeIdentity is identityFile's content.
type nodeIdentity struct {
	Format int    `json:"format"`
	NodeID uint64 `json:"node_id"`
	// ClusterID names the cluster: for a founding member, derived from initial_cluster
	// (clusterID), so that every founder computes the same one; for a node that joined, the
	// name the cluster gave it; empty for a node not admitted yet.
	ClusterID string `json:"cluster_id,omitempty"`
	// Founders is initial_cluster as the founders gave it (FormatMembers), for the messages.
	Founders string `json:"founders,omitempty"`
	// JoinedThrough is the join address of a node that was not a founding member.
	JoinedThrough string `json:"joined_through,omitempty"`
	// Members are, for a node that joined, the cluster's nodes when it was admitted, the ones a
	// restart reaches first; the meta state keeps the current list.
	Members []identityMember `json:"members,omitempty"`
	// AdmittedAt is, for a node that joined on an empty data directory, the meta index its
	// admission is applied at (JoinOk's admitted_at): a removal of its ID applied before it is
	// the removed node's whose ID it took, not its own.
	AdmittedAt uint64 `json:"admitted_at,omitempty"`
}

// identityMember is a node of the cluster in identityFile.
type identityMember struct {
	NodeID  string `json:"node_id"`
	Address string `json:"address"` // its inter-node address
}

// clusterID names the cluster founded by members: "fila-" and the first 16 hex digits of the
// SHA-256 of their canonical list.
func clusterID(members []config.Member) string {
	sum := sha256.Sum256([]byte(config.FormatMembers(members)))
	return "fila-" + hex.EncodeToString(sum[:8])
}

// badInputError is a start refused because of what was given (a setting, the data directory):
// main prints it as one line and exits 2, as for a bad setting.
type badInputError struct{ msg string }

func (e *badInputError) Error() string { return e.msg }

func badInput(format string, args ...any) error {
	return &badInputError{msg: fmt.Sprintf(format, args...)}
}

// claimDataDir checks that cfg's data directory belongs to the node cfg describes, and on a
// cluster node's first start (an empty directory) writes the node's identity into it. It
// returns the identity (the zero value for a single node).
func claimDataDir(cfg config.Config) (nodeIdentity, error) {
	dir := cfg.DataDir
	path := filepath.Join(dir, identityFile)
	id, found, err := readIdentity(path)
	if err != nil {
		return id, err
	}
	if found {
		return id, id.matches(cfg)
	}
	if !cfg.Clustered() {
		return id, nil
	}
	store, err := holdsStore(dir)
	if err != nil {
		return id, err
	}
	switch {
	case store:
		return id, badInput("data_dir %s holds a single node's data (it has a store but no %s): a cluster node starts on an empty data directory; "+
			"start this one without node_id to serve it as the single node it is", dir, identityFile)
	case cfg.InitialCluster == "" && cfg.Join == "":
		return id, badInput("node_id %d: data_dir %s is empty, so this is the node's first start: give initial_cluster (a founding member) "+
			"or join (a node added later)", cfg.NodeID, dir)
	}
	id = nodeIdentity{Format: identityFormat, NodeID: cfg.NodeID, JoinedThrough: cfg.Join}
	if members := cfg.InitialMembers(); members != nil {
		id.ClusterID, id.Founders, id.JoinedThrough = clusterID(members), config.FormatMembers(members), ""
		if err := checkFounders(cfg, members, id.ClusterID); err != nil {
			return id, err // before anything is written: the next start asks again
		}
	}
	return id, writeIdentity(dir, path, id)
}

// matches refuses cfg when the directory belongs to another node or cluster.
func (id nodeIdentity) matches(cfg config.Config) error {
	dir := cfg.DataDir
	if !cfg.Clustered() {
		return badInput("data_dir %s belongs to node %d of %s: start it with --node-id %d and its cluster settings, "+
			"or give a single node another data directory", dir, id.NodeID, id.cluster(), id.NodeID)
	}
	if cfg.NodeID != id.NodeID {
		return badInput("data_dir %s belongs to node %d of %s, not node %d: give node %d its own data directory "+
			"(an empty one on its first start)", dir, id.NodeID, id.cluster(), cfg.NodeID, cfg.NodeID)
	}
	if members := cfg.InitialMembers(); members != nil && id.ClusterID != "" && clusterID(members) != id.ClusterID {
		return badInput("data_dir %s belongs to %s, not the cluster initial_cluster names (%s, cluster %s): give this node an empty data directory "+
			"to found that one, or the list its cluster was founded with (or none: it is read only on a first start)",
			dir, id.cluster(), config.FormatMembers(members), clusterID(members))
	}
	return nil
}

// cluster describes the cluster the identity belongs to, for a message.
func (id nodeIdentity) cluster() string {
	switch {
	case id.ClusterID != "" && id.Founders != "":
		return fmt.Sprintf("cluster %s (founded as %s)", id.ClusterID, id.Founders)
	case id.ClusterID != "":
		return fmt.Sprintf("cluster %s (joined through %s)", id.ClusterID, id.JoinedThrough)
	case id.JoinedThrough != "":
		return fmt.Sprintf("the cluster it joined through %s", id.JoinedThrough)
	}
	return "a cluster"
}

// readIdentity reads path; found is false when there is none.
func readIdentity(path string) (id nodeIdentity, found bool, err error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return id, false, nil
	case err != nil:
		return id, false, err
	}
	if err := json.Unmarshal(data, &id); err != nil || id.NodeID == 0 {
		return id, true, fmt.Errorf("%s: not a node's identity (%v); it names the node and cluster this data directory belongs to: "+
			"restore it from a backup of this node's directory", path, err)
	}
	if id.Format != identityFormat {
		return id, true, fmt.Errorf("%s: identity format %d; this release reads format %d", path, id.Format, identityFormat)
	}
	return id, true, nil
}

// holdsStore reports whether dir holds a store (Pebble's manifest or its marker).
func holdsStore(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, "MANIFEST-") || strings.HasPrefix(n, "marker.manifest.") {
			return true, nil
		}
	}
	return false, nil
}

// writeIdentity writes id to path in dir (created if need be) through a synced temporary file
// and a rename, then syncs dir: after a crash the file is whole or absent.
func writeIdentity(dir, path string, id nodeIdentity) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".fila-node-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	_, err = tmp.Write(append(data, '\n'))
	if err = errors.Join(err, tmp.Sync(), tmp.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncPath(dir)
}
