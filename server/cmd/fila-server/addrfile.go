package main

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// boundAddrs is what --addr-file receives once the server is ready: the addresses its listeners
// are bound to, ports chosen by the system included.
type boundAddrs struct {
	FIBP string `json:"fibp"`
	Rift string `json:"rift,omitempty"` // absent without Rift
	HTTP string `json:"http,omitempty"` // absent without http_listen
	// Cluster is the inter-node address (cluster_listen) of a cluster node; absent on a single node.
	Cluster string `json:"cluster,omitempty"`
}

// writeAddrFile writes a to path through a temporary file and a rename, so that a reader sees
// the whole file or none.
func writeAddrFile(path string, a boundAddrs) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".addr-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
