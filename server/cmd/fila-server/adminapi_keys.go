package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
)

// API keys and their ACLs, for superadmin keys only (as FIBP's key requests):
//
//	GET  /api/v1/keys               every key (never a secret: none is kept)
//	POST /api/v1/keys               create one: {"name", "expires_at", "superadmin"} → {"id", "secret"}
//	POST /api/v1/keys/{id}/revoke   revoke one
//	PUT  /api/v1/keys/{id}/acl      replace its permissions: {"acl": [{"kind", "pattern"}]}

const keysPath = apiPath + "keys"

func (api *adminAPI) keyRoutes() {
	api.mux.HandleFunc("GET "+keysPath, api.handle(listKeys))
	api.mux.HandleFunc("POST "+keysPath, api.handle(createKey))
	api.mux.HandleFunc("POST "+keysPath+"/{id}/revoke", api.handle(revokeKey))
	api.mux.HandleFunc("PUT "+keysPath+"/{id}/acl", api.handle(setACL))
}

type keyJSON struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"` // null: never
	Superadmin bool       `json:"superadmin"`
	ACL        []permJSON `json:"acl"`
}

type permJSON struct {
	Kind    string `json:"kind"` // produce, consume, admin or throttle
	Pattern string `json:"pattern"`
}

func toKeyJSON(r *auth.Record) keyJSON {
	k := keyJSON{ID: r.ID, Name: r.Name, CreatedAt: time.UnixMilli(int64(r.CreatedAt)).UTC(), Superadmin: r.Superadmin,
		ACL: make([]permJSON, len(r.ACL))}
	if r.ExpiresAt != 0 {
		t := time.UnixMilli(int64(r.ExpiresAt)).UTC()
		k.ExpiresAt = &t
	}
	for i, p := range r.ACL {
		k.ACL[i] = permJSON{Kind: p.Kind.String(), Pattern: p.Pattern}
	}
	return k
}

func listKeys(b *broker.Broker, p *auth.Principal, _ *http.Request) (any, *httpError) {
	if herr := superadmin(p, "listing API keys"); herr != nil {
		return nil, herr
	}
	recs := b.ListAPIKeys()
	out := make([]keyJSON, len(recs))
	for i := range recs {
		out[i] = toKeyJSON(&recs[i])
	}
	return map[string]any{"keys": out}, nil
}

// expiry is a key's expires_at: an RFC 3339 time, Unix milliseconds, or null/absent for never.
type expiry struct{ ms uint64 }

func (e *expiry) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	var t time.Time
	if err := json.Unmarshal(b, &t); err == nil {
		if t.UnixMilli() <= 0 {
			return &json.UnsupportedValueError{Str: string(b)}
		}
		e.ms = uint64(t.UnixMilli())
		return nil
	}
	return json.Unmarshal(b, &e.ms)
}

func createKey(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	if herr := superadmin(p, "creating an API key"); herr != nil {
		return nil, herr
	}
	var req struct {
		Name       string `json:"name"`
		ExpiresAt  expiry `json:"expires_at"`
		Superadmin bool   `json:"superadmin"`
	}
	if herr := readJSON(r, &req); herr != nil {
		return nil, herr
	}
	k, e := b.CreateAPIKey(req.Name, req.ExpiresAt.ms, req.Superadmin)
	if e != nil {
		return nil, brokerRefusal(e)
	}
	return map[string]any{"id": k.ID, "secret": k.Secret, "superadmin": k.Superadmin}, nil
}

func revokeKey(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	if herr := superadmin(p, "revoking an API key"); herr != nil {
		return nil, herr
	}
	var none struct{}
	if herr := readJSON(r, &none); herr != nil {
		return nil, herr
	}
	id := r.PathValue("id")
	if e := b.RevokeAPIKey(id); e != nil {
		return nil, brokerRefusal(e)
	}
	return map[string]string{"revoked": id}, nil
}

func setACL(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	if herr := superadmin(p, "setting an ACL"); herr != nil {
		return nil, herr
	}
	var req struct {
		ACL []permJSON `json:"acl"`
	}
	if herr := readJSON(r, &req); herr != nil {
		return nil, herr
	}
	acl := make([]auth.Permission, len(req.ACL))
	for i, pj := range req.ACL {
		kind, err := auth.ParseKind(pj.Kind)
		if err != nil {
			return nil, refuse(http.StatusBadRequest, "acl[%d]: %v", i, err)
		}
		acl[i] = auth.Permission{Kind: kind, Pattern: pj.Pattern}
	}
	id := r.PathValue("id")
	if e := b.SetACL(id, acl); e != nil {
		return nil, brokerRefusal(e)
	}
	rec, e := b.GetACL(id)
	if e != nil {
		return nil, brokerRefusal(e)
	}
	return toKeyJSON(&rec), nil
}
