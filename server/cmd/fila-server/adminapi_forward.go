package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	linkproto "github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/nodelink"
	"github.com/filamq/fila/server/service"
)

// Admin API requests about a queue another node leads. A queue's messages, fairness keys and
// explanations live in the state of the node that leads its group: a follower's replica holds
// the group's log only. A request under /api/v1/queues/{queue}/ that this node cannot answer from
// its own state is therefore handed to the queue's leader over the node link (ForwardHTTP) with
// the headers the API reads (a request about shard i of a sharded queue, ?shard=i, to the leader
// of the shard's group), served there as if the client had sent it there — authenticated
// again, with the same key — and its answer is this node's. A forwarded request is never
// forwarded again (the leadership may have moved meanwhile: the receiver then answers from its own
// state). A forward that fails is answered from this node's state for a read, and 503 for a
// change (it may have been carried out there).

// forwardHTTPTimeout bounds a request handed to another node: a purge of a long queue there takes
// as long as its removal.
const forwardHTTPTimeout = time.Minute

// forwardedHeaders are the request headers the API reads, passed on with a forwarded request.
var forwardedHeaders = []string{"Authorization", "Cookie", "Content-Type", "Origin", "Sec-Fetch-Site", csrfHeader}

// forwardedKey marks, in a request's context, a request another node forwarded here.
type forwardedKey struct{}

// apiLink is what the admin API needs of a cluster node: the node link and this node's ID.
type apiLink struct {
	l    *nodelink.Link
	self uint64
	log  *slog.Logger
}

// setLink has the API hand requests about queues other nodes lead to those nodes, and serve the
// requests they hand to this one. Called before the broker is stored.
func (api *adminAPI) setLink(l *nodelink.Link, self uint64, log *slog.Logger) {
	api.link = &apiLink{l: l, self: self, log: log}
	l.SetHTTPServer(api.serveForwarded)
}

// elsewhere hands r to the leader of the queue it names, when another node leads it, and reports
// whether it answered r.
func (api *adminAPI) elsewhere(b *broker.Broker, w http.ResponseWriter, r *http.Request) bool {
	queue := r.PathValue("queue")
	if queue == "" || api.link == nil || r.Context().Value(forwardedKey{}) != nil {
		return false
	}
	group, herr := groupOf(b, queue, r) // a shard's group, for ?shard=i
	if herr != nil {
		return false // the handler refuses it
	}
	routes, ok, e := b.QueueRoutes([]string{group})
	if !ok || e != nil || len(routes) != 1 || routes[0].LeaderNodeID == 0 || routes[0].LeaderNodeID == api.link.self {
		return false
	}
	leader := routes[0].LeaderNodeID
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	if err != nil {
		writeAPIError(w, refuse(http.StatusRequestEntityTooLarge, "the request's body is over %d bytes", maxBodyBytes))
		return true
	}
	req := &linkproto.ForwardHTTP{Method: r.Method, Target: r.URL.RequestURI(), RemoteAddr: r.RemoteAddr, Body: body,
		Headers: passedHeaders(r)}
	res, err := api.link.l.ForwardHTTP(nodeName(leader), req, forwardHTTPTimeout)
	if err != nil {
		if !changes(r.Method) {
			api.link.log.Info("admin API request handed to the queue's leader failed; answering from this node",
				"queue", queue, "leader", leader, "err", err)
			r.Body = io.NopCloser(bytes.NewReader(body))
			return false
		}
		writeAPIError(w, refuse(http.StatusServiceUnavailable,
			"queue %q is led by node %d, which this node could not reach (%v); retry", queue, leader, err))
		return true
	}
	if res.ContentType != "" {
		w.Header().Set("Content-Type", res.ContentType)
	}
	w.WriteHeader(int(res.Status))
	_, _ = w.Write(res.Body)
	return true
}

// remoteRowsTimeout bounds the rows a queue list asks of another node: a read, answered without
// that node's queues when it fails.
const remoteRowsTimeout = 5 * time.Second

// remoteRows is the queue list's service.RowFetcher on a node of a cluster (nil on a single node):
// the rows of queue groups another node leads, asked of it with the caller's headers
// (GET /api/v1/queues?group=...), so that it shows only what the caller may see.
func (api *adminAPI) remoteRows(r *http.Request) service.RowFetcher {
	if api.link == nil {
		return nil
	}
	return func(node uint64, groups []string) map[string]service.QueueRow {
		req := &linkproto.ForwardHTTP{Method: http.MethodGet, Target: apiPath + "queues?" + url.Values{"group": groups}.Encode(),
			RemoteAddr: r.RemoteAddr, Headers: passedHeaders(r)}
		res, err := api.link.l.ForwardHTTP(nodeName(node), req, remoteRowsTimeout)
		var page struct {
			Queues []service.QueueRow `json:"queues"`
		}
		if err == nil && res.Status == http.StatusOK {
			err = json.Unmarshal(res.Body, &page)
		} else if err == nil {
			err = fmt.Errorf("status %d: %s", res.Status, res.Body)
		}
		if err != nil {
			api.link.log.Info("the queue list's rows of another node's queues failed; listing without them", "node", node, "err", err)
			return nil
		}
		out := make(map[string]service.QueueRow, len(page.Queues))
		for _, row := range page.Queues {
			out[row.Name] = row
		}
		return out
	}
}

// passedHeaders are the headers of r a request handed to another node carries: those the API
// reads, and the Host.
func passedHeaders(r *http.Request) []linkproto.HTTPHeader {
	hs := []linkproto.HTTPHeader{{Name: "Host", Value: r.Host}}
	for _, name := range forwardedHeaders {
		for _, v := range r.Header.Values(name) {
			hs = append(hs, linkproto.HTTPHeader{Name: name, Value: v})
		}
	}
	return hs
}

// serveForwarded serves a request another node handed to this one (the node link's HTTPServer).
func (api *adminAPI) serveForwarded(req *linkproto.ForwardHTTP) (*linkproto.ForwardHTTPResult, error) {
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), forwardedKey{}, true), forwardHTTPTimeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, req.Method, req.Target, bytes.NewReader(req.Body))
	if err != nil {
		return nil, fmt.Errorf("a forwarded request %s %q: %w", req.Method, req.Target, err)
	}
	r.RequestURI, r.RemoteAddr = req.Target, req.RemoteAddr
	for _, h := range req.Headers {
		if h.Name == "Host" {
			r.Host = h.Value
			continue
		}
		r.Header.Add(h.Name, h.Value)
	}
	rec := &recorder{h: http.Header{}}
	api.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &linkproto.ForwardHTTPResult{Status: uint16(rec.status), ContentType: rec.h.Get("Content-Type"), Body: rec.buf.Bytes()}, nil
}

// recorder is the http.ResponseWriter of a forwarded request: what the handler answered.
type recorder struct {
	h      http.Header
	status int
	buf    bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.buf.Write(b)
}
