package main

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
)

// The admin HTTP API (docs/admin-api.md): JSON under apiPath on the HTTP listener, for the CLI's
// verbs FIBP has no frame for and for the web console. Each endpoint is a handler: it gets the
// open broker and the authenticated caller (apiCaller, adminauth.go) and answers a value to
// encode or a refusal. The endpoints live in the adminapi_*.go files, one subject each.

// apiPath is the prefix of every admin API path.
const apiPath = "/api/v1/"

// maxBodyBytes bounds a request body the API reads (a key's ACL is the largest).
const maxBodyBytes = 64 << 10

// adminAPI serves apiPath. The broker is set once it is open.
type adminAPI struct {
	b      atomic.Pointer[broker.Broker]
	mux    *http.ServeMux
	counts queueCounts // the overview's (adminapi_overview.go)
	link   *apiLink    // a cluster node's (adminapi_forward.go); nil for a single node
}

func newAdminAPI() *adminAPI {
	api := &adminAPI{mux: http.NewServeMux()}
	api.sessionRoutes()
	api.messageRoutes()
	api.queueRoutes()
	api.throttleRoutes()
	api.keyRoutes()
	api.clusterRoutes()
	api.memberRoutes() // adminapi_cluster.go
	return api
}

func (api *adminAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff") // JSON is never read as a page
	w.Header().Set("Cache-Control", "no-store")
	if _, pattern := api.mux.Handler(r); pattern == "" {
		writeAPIError(w, refuse(http.StatusNotFound, "no such admin API path: %s %s", r.Method, r.URL.Path))
		return
	}
	api.mux.ServeHTTP(w, r)
}

// handler is one endpoint: it answers a value to encode as JSON, or a refusal.
type handler func(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError)

// handle authenticates the caller and answers what h does as JSON.
func (api *adminAPI) handle(h handler) http.HandlerFunc { return api.handleQueue(h, nil) }

// handleQueue is handle for a per-queue view that all answers for a sharded queue as a whole
// (adminapi_shards.go): a request naming a sharded queue, without ?shard=, is all's.
func (api *adminAPI) handleQueue(h handler, all whole) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b := api.b.Load()
		if b == nil {
			writeAPIError(w, refuse(http.StatusServiceUnavailable, "the server is still opening its store; ask again once /readyz says ready"))
			return
		}
		p, herr := apiCaller(b, r)
		if herr == nil {
			var res any
			switch n := wholeShards(b, r); {
			case all != nil && n > 1:
				res, herr = all(api, b, p, r, n)
			case api.elsewhere(b, w, r):
				return
			default:
				res, herr = h(b, p, r)
			}
			if herr == nil {
				if raw, ok := res.(rawAnswer); ok {
					writeRaw(w, raw)
					return
				}
				writeAPIJSON(w, res)
				return
			}
		}
		writeAPIError(w, herr)
	}
}

// writeAPIJSON answers v. encoding/json escapes <, > and & in strings, so that no name in an
// answer can read as markup whatever reads it.
func writeAPIJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// writeAPIError answers a refusal as {"error": ..., "code": ...}: the code is the broker's
// (QueueNotFound, ...) when the broker refused, otherwise the status's (statusCodes).
func writeAPIError(w http.ResponseWriter, e *httpError) {
	if e.code == "" {
		e.code = statusCodes[e.status]
		if e.code == "" {
			e.code = strconv.Itoa(e.status)
		}
	}
	writeJSONError(w, e)
}

// statusCodes are the codes of refusals that are not the broker's.
var statusCodes = map[int]string{
	http.StatusBadRequest:            "bad_request",
	http.StatusUnauthorized:          "unauthorized",
	http.StatusForbidden:             "forbidden",
	http.StatusNotFound:              "not_found",
	http.StatusConflict:              "conflict",
	http.StatusRequestEntityTooLarge: "too_large",
	http.StatusUnsupportedMediaType:  "unsupported_media_type",
	http.StatusServiceUnavailable:    "unavailable",
	http.StatusInternalServerError:   "internal",
}

// readJSON decodes r's body, at most maxBodyBytes of Content-Type application/json (which no
// page may post to another origin without asking it first), into v; an empty body leaves v as
// it is. Unknown fields are refused: a misspelt one would otherwise be ignored in silence.
func readJSON(r *http.Request, v any) *httpError {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return refuse(http.StatusUnsupportedMediaType, "send Content-Type: application/json")
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, err2 := dec.Token(); err2 != io.EOF {
			return refuse(http.StatusBadRequest, "the body holds more than one JSON value")
		}
		return nil
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case errors.As(err, &tooLarge):
		return refuse(http.StatusRequestEntityTooLarge, "the body is larger than %d bytes", maxBodyBytes)
	}
	return refuse(http.StatusBadRequest, "the body is not what this endpoint takes: %v", err)
}

// pageLimit reads the query's limit: def when absent, else 1 to max (a larger one is refused,
// not cut, so that a client learns the bound).
func pageLimit(r *http.Request, name string, def, max int) (int, *httpError) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, refuse(http.StatusBadRequest, "%s=%q: want a number from 1 to %d", name, s, max)
	}
	return n, nil
}

// oneOf reads the query's name, which must be one of allowed (the first when absent).
func oneOf(r *http.Request, name string, allowed ...string) (string, *httpError) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return allowed[0], nil
	}
	for _, a := range allowed {
		if s == a {
			return s, nil
		}
	}
	return "", refuse(http.StatusBadRequest, "%s=%q: want one of %v", name, s, allowed)
}
