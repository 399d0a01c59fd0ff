package main

import (
	"net/http"

	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/service"
	"github.com/filamq/fila/server/session"
)

// The queues, their fairness keys and explain (the broker's QueueSummaries, FairnessKeys,
// Explain and ExplainKey):
//
//	GET /api/v1/queues?search=S&after=NAME&limit=N&sort=name|depth|oldest  the queue list
//	GET /api/v1/queues/{queue}                                            one queue, with its definition
//	GET /api/v1/queues/{queue}/keys?search=S&sort=backlog|deliveries|name&after=KEY&limit=N
//	GET /api/v1/queues/{queue}/keys/{key}/explain                         why a key's backlog waits
//	GET /api/v1/queues/{queue}/messages/{id}/explain                      why a message waits
//
// The list shows the queues the caller holds any permission on (as FIBP's ListQueues); the
// others need admin or consume on the queue, as reading its messages does. The keys, explain
// views take ?shard=i (shard i of a sharded queue alone); without it a sharded queue is answered
// as a whole (adminapi_shards.go, adminapi_shardviews.go).

func (api *adminAPI) queueRoutes() {
	api.mux.HandleFunc("GET "+apiPath+"queues", api.handle(api.listQueues))
	api.mux.HandleFunc("GET "+queuesPath+"{queue}", api.handle(api.getQueue))
	api.mux.HandleFunc("GET "+queuesPath+"{queue}/keys", api.handleQueue(fairnessKeys, keysShards))
	api.mux.HandleFunc("GET "+queuesPath+"{queue}/keys/{key}/explain", api.handleQueue(explainKey, explainKeyShards))
	api.mux.HandleFunc("GET "+queuesPath+"{queue}/messages/{id}/explain", api.handleQueue(explainMessage, oneMessage))
	api.redriveRoutes()
	api.createRoutes()
}

// nextOf is a page's next: null on the last page.
func nextOf(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (api *adminAPI) listQueues(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	q := r.URL.Query()
	if groups := q["group"]; len(groups) > 0 { // another node's list asks for rows it cannot read
		var visible func(string) bool
		if !p.Superadmin() {
			visible = p.Any
		}
		return struct {
			Queues []service.QueueRow `json:"queues"`
		}{b.GroupRows(groups, visible)}, nil
	}
	o := service.QueueListOptions{Search: q.Get("search"), After: q.Get("after")}
	var herr *httpError
	if o.Limit, herr = pageLimit(r, "limit", service.DefaultQueuePage, service.MaxQueuePage); herr != nil {
		return nil, herr
	}
	if o.Sort, herr = oneOf(r, "sort", "name", "depth", "oldest"); herr != nil {
		return nil, herr
	}
	if !p.Superadmin() {
		o.Visible = p.Any
	}
	o.Remote = api.remoteRows(r)
	page, e := b.QueueSummaries(o)
	if e != nil {
		return nil, brokerRefusal(e)
	}
	return struct {
		Queues []service.QueueRow `json:"queues"`
		Next   *string            `json:"next"`
		Total  int                `json:"total"`
	}{page.Queues, nextOf(page.Next), page.Total}, nil
}

func (api *adminAPI) getQueue(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	queue := r.PathValue("queue")
	if herr := permitted(p, queue, auth.Admin, auth.Consume); herr != nil {
		return nil, herr
	}
	row, e := b.QueueSummaryFrom(queue, api.remoteRows(r))
	if e != nil {
		return nil, brokerRefusal(e)
	}
	def, e := b.Definition(queue)
	if e != nil {
		return nil, brokerRefusal(e)
	}
	return struct {
		service.QueueRow
		Definition map[string]string `json:"definition"`
	}{row, session.Settings(&def)}, nil
}

func fairnessKeys(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	_, group, herr := target(b, p, r, auth.Admin, auth.Consume)
	if herr != nil {
		return nil, herr
	}
	q := r.URL.Query()
	o := service.KeyListOptions{Search: q.Get("search"), After: q.Get("after")}
	if o.Limit, herr = pageLimit(r, "limit", service.DefaultKeyPage, service.MaxKeyPage); herr != nil {
		return nil, herr
	}
	if o.Sort, herr = oneOf(r, "sort", "backlog", "deliveries", "name"); herr != nil {
		return nil, herr
	}
	page, e := b.FairnessKeys(group, o)
	if e != nil {
		return nil, brokerRefusal(e)
	}
	return keyPageJSON{page.Keys, nextOf(page.Next), page.Total, page.DeliveriesLastMinute, page.Asleep}, nil
}

// keyPageJSON is a page of a queue's fairness keys.
type keyPageJSON struct {
	Keys                 []service.KeyRow `json:"keys"`
	Next                 *string          `json:"next"`
	Total                int              `json:"total"`
	DeliveriesLastMinute uint64           `json:"deliveries_last_minute"`
	Asleep               bool             `json:"asleep,omitempty"`
}

func explainKey(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	_, group, herr := target(b, p, r, auth.Admin, auth.Consume)
	if herr != nil {
		return nil, herr
	}
	x, e := b.ExplainKey(group, r.PathValue("key"))
	if e != nil {
		return nil, brokerRefusal(e)
	}
	return x, nil
}

func explainMessage(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	_, group, id, herr := readableMessage(b, p, r)
	if herr != nil {
		return nil, herr
	}
	x, e := b.Explain(group, service.MessageID(id))
	if e != nil {
		return nil, brokerRefusal(e)
	}
	return x, nil
}
