package main

import (
	"errors"
	"net/http"

	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
)

// The cluster's membership, for superadmin keys (FIBP has no frame for it):
//
//	GET  /api/v1/cluster/members              the members (up, draining), the removed IDs and
//	                                          the progress of removals
//	POST /api/v1/cluster/members/{id}/remove  {"force": bool} removes member id
//	                                          → {"node_id", "groups"}
//
// A removal is refused with 404 node_not_found (no such member, or removed already), 409 self
// (the node asked is the one to remove: ask another), 409 node_not_drained (not draining, without
// force), 409 quorum (a group would lose the majority of its voters, without force), 409
// last_member, 400 not_a_cluster.

const membersPath = apiPath + "cluster/members"

func (api *adminAPI) memberRoutes() {
	api.mux.HandleFunc("GET "+membersPath, api.handle(members))
	api.mux.HandleFunc("POST "+membersPath+"/{id}/remove", untimedFunc(api.handle(removeMember)))
}

// membersJSON is MembershipStatus.
type membersJSON struct {
	NodeID  string       `json:"node_id"` // the node that answers
	Members []memberJSON `json:"members"`
	Removed []string     `json:"removed"`
	// Removals are the removed nodes with the groups whose Raft configuration may still hold
	// each (the meta group counts); a node with none left has its ID free for a new node.
	Removals []removalJSON `json:"removals"`
	// JoiningReplicas counts the replicas placed by removals that have not caught up yet, in
	// JoiningGroups queue groups; UnsettledHere the groups the answering node leads whose Raft
	// configuration does not yet match their placement.
	JoiningReplicas int `json:"joining_replicas"`
	JoiningGroups   int `json:"joining_groups"`
	UnsettledHere   int `json:"unsettled_here"`
}

type removalJSON struct {
	ID         string `json:"id"`
	GroupsLeft int    `json:"groups_left"`
	IDFree     bool   `json:"id_free"`
}

type memberJSON struct {
	ID        string `json:"id"`
	Address   string `json:"address"`
	Advertise string `json:"advertise,omitempty"`
	Draining  bool   `json:"draining"`
	Up        bool   `json:"up"`
	MetaVoter bool   `json:"meta_voter"` // a voter of the meta group, as the answering node knows its configuration
}

func members(b *broker.Broker, p *auth.Principal, _ *http.Request) (any, *httpError) {
	if herr := superadmin(p, "the cluster's membership"); herr != nil {
		return nil, herr
	}
	st := b.MembershipStatus()
	out := membersJSON{NodeID: b.NodeID(), Members: []memberJSON{}, Removed: st.Removed, JoiningReplicas: st.JoiningReplicas,
		JoiningGroups: st.JoiningGroups, UnsettledHere: st.UnsettledHere}
	if out.Removed == nil {
		out.Removed = []string{}
	}
	out.Removals = []removalJSON{}
	for _, r := range st.Removals {
		out.Removals = append(out.Removals, removalJSON{ID: r.ID, GroupsLeft: r.GroupsLeft, IDFree: r.GroupsLeft == 0})
	}
	for _, m := range st.Members {
		out.Members = append(out.Members, memberJSON{ID: m.ID, Address: m.Address, Advertise: m.Advertise, Draining: m.Draining, Up: m.Up,
			MetaVoter: m.MetaVoter})
	}
	return out, nil
}

// removeRequest is a removal's body.
type removeRequest struct {
	Force bool `json:"force"`
}

func removeMember(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	if herr := superadmin(p, "removing a node"); herr != nil {
		return nil, herr
	}
	var req removeRequest
	if herr := readJSON(r, &req); herr != nil {
		return nil, herr
	}
	res, err := b.RemoveNode(r.PathValue("id"), req.Force)
	var refused *broker.RemovalRefused
	switch {
	case errors.As(err, &refused):
		status := http.StatusConflict
		switch refused.Reason {
		case "node_not_found":
			status = http.StatusNotFound
		case "not_a_cluster":
			status = http.StatusBadRequest
		}
		herr := refuse(status, "%s", refused.Message)
		herr.code = refused.Reason
		return nil, herr
	case err != nil:
		return nil, refuse(http.StatusServiceUnavailable, "the removal was not carried out: %v; retry", err)
	}
	return map[string]any{"node_id": res.Node, "groups": res.Groups}, nil
}
