package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// removeAPI is a broker's admin API for the membership verbs: node 2 is a drained member
// replicating two queue groups, whose new replicas catch up one per GET of the members; node 3 is
// not drained; node 9 is none.
type removeAPI struct {
	mu      sync.Mutex
	joining int
	bodies  []string
}

func (s *removeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/cluster/members":
		json.NewEncoder(w).Encode(map[string]any{"node_id": "1", "members": []map[string]any{
			{"id": "1", "address": "127.0.0.1:1", "advertise": "127.0.0.1:5555", "up": true},
			{"id": "3", "address": "127.0.0.1:3", "advertise": "127.0.0.1:5557", "up": false, "draining": false}},
			"removed": []string{"2"}, "joining_replicas": s.joining, "joining_groups": s.joining})
		if s.joining > 0 {
			s.joining--
		}
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/cluster/members/2/remove":
		s.bodies = append(s.bodies, string(body))
		s.joining = 2
		json.NewEncoder(w).Encode(map[string]any{"node_id": "2", "groups": 2})
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/cluster/members/3/remove":
		s.bodies = append(s.bodies, string(body))
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(map[string]any{"code": "node_not_drained",
			"error": "node 3 is not drained: drain it first (fila cluster drain 3), or remove it with --force if it is lost for good"})
	default:
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]any{"code": "node_not_found", "error": `no node of the cluster has the ID "9"`})
	}
}

// fila cluster remove shows the new replicas catching up until all have; refusals are one line
// with the broker's reason; --force is sent; a NODE_ID that is no number is a usage error; fila
// cluster members lists the members, the removed IDs and what is catching up.
func TestClusterRemoveCommand(t *testing.T) {
	removePoll = time.Millisecond
	api := &removeAPI{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	out, errOut, code := runCLI(t, "cluster", "remove", "2", "--http-addr", addr)
	want := "node 2 removed: 2 queue groups to place on other nodes\n" +
		"0 of 2 queue groups caught up on their new replicas\n" +
		"1 of 2 queue groups caught up on their new replicas\n" +
		"done: every queue group node 2 replicated has caught up on its new replica\n"
	if code != 0 || out != want {
		t.Fatalf("remove: exit %d\n%s%s\nwant\n%s", code, out, errOut, want)
	}
	out, _, code = runCLI(t, "--json", "cluster", "remove", "2", "--http-addr", addr)
	var row removeRow
	if code != 0 || json.Unmarshal([]byte(out), &row) != nil || row != (removeRow{NodeID: "2", Groups: 2, CaughtUp: true}) {
		t.Fatalf("remove --json: exit %d: %s", code, out)
	}

	_, errOut, code = runCLI(t, "cluster", "remove", "3", "--http-addr", addr)
	if code != 1 || !strings.Contains(errOut, "node 3 is not drained: drain it first") {
		t.Fatalf("remove of a node not drained: exit %d: %s", code, errOut)
	}
	runCLI(t, "cluster", "remove", "3", "--force", "--http-addr", addr)
	if got := api.bodies[len(api.bodies)-1]; got != `{"force":true}` {
		t.Fatalf("--force sent %s", got)
	}
	_, errOut, code = runCLI(t, "cluster", "remove", "9", "--http-addr", addr)
	if code != 1 || !strings.Contains(errOut, `no node of the cluster has the ID "9" (HTTP 404)`) {
		t.Fatalf("remove of an unknown node: exit %d: %s", code, errOut)
	}
	if _, errOut, code = runCLI(t, "cluster", "remove", "x", "--http-addr", addr); code != 2 || !strings.Contains(errOut, `NODE_ID "x" is not a node ID`) {
		t.Fatalf("remove x: exit %d: %s", code, errOut)
	}

	out, _, code = runCLI(t, "cluster", "members", "--http-addr", addr)
	want = "NODE      STATE        DRAINING  ADDRESS\n" +
		"1         up           false     127.0.0.1:5555\n" +
		"3         unreachable  false     127.0.0.1:5557\n" +
		"removed: [2]\n"
	if code != 0 || out != want {
		t.Fatalf("members: exit %d\n%s\nwant\n%s", code, out, want)
	}
}

// fila cluster members shows each removed node's removal: removing, with the groups whose Raft
// configuration may still hold it, or removed with its ID free for a new node.
func TestClusterMembersShowsRemovals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"node_id": "1", "members": []map[string]any{
			{"id": "1", "address": "127.0.0.1:1", "advertise": "127.0.0.1:5555", "up": true, "meta_voter": true}},
			"removed":  []string{"2", "3", "4"},
			"removals": []map[string]any{{"id": "2", "groups_left": 3}, {"id": "3", "groups_left": 1}, {"id": "4", "groups_left": 0, "id_free": true}}})
	}))
	defer srv.Close()
	out, errOut, code := runCLI(t, "cluster", "members", "--http-addr", strings.TrimPrefix(srv.URL, "http://"))
	want := "NODE      STATE        DRAINING  ADDRESS\n" +
		"1         up           false     127.0.0.1:5555\n" +
		"2         removing (3 groups left)\n" +
		"3         removing (1 group left)\n" +
		"4         removed (ID free)\n"
	if code != 0 || out != want {
		t.Fatalf("members: exit %d\n%s%s\nwant\n%s", code, out, errOut, want)
	}
}
