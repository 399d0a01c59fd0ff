package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
)

// A sharded queue as a whole (docs/sharding.md, "The whole queue"). Each shard of a sharded queue
// is a queue group of its own, led by any node; the per-queue views below name the queue
// (orders, orders.dlq) and answer for every shard:
//
//   - purge and redrive are carried out on each shard in turn and answer the totals (a redrive
//     up to count in all);
//   - one message (GET, DELETE, explain) goes to the shard its ID names;
//   - a peek merges the shards' pages by message ID, and the key list merges theirs in the
//     list's order;
//   - a key's explanation goes to the key's shard when the queue places messages by fairness key.
//
// Each shard's part is the same request with ?shard=i, served through this API as a client's
// would be (authenticated again, handed to the shard's leader over the node link when another
// node leads it). ?shard=i is also the clients' way to ask about shard i alone.

// shardParam is the query parameter naming one shard of a sharded queue.
const shardParam = "shard"

// whole answers a request about a sharded queue as a whole, given its shard count n.
type whole func(api *adminAPI, b *broker.Broker, p *auth.Principal, r *http.Request, n uint32) (any, *httpError)

// rawAnswer is an answer passed on as a shard gave it.
type rawAnswer struct {
	status      int
	contentType string
	body        []byte
}

// wholeShards is the shard count of the queue r names when r is about it as a whole: it names
// the queue (not a shard's group), no shard, and no other node handed it here. 0 or 1 otherwise.
func wholeShards(b *broker.Broker, r *http.Request) uint32 {
	queue := r.PathValue("queue")
	if r.URL.Query().Has(shardParam) || r.Context().Value(forwardedKey{}) != nil || isShardGroup(queue) {
		return 0
	}
	return b.ShardCount(queue)
}

// isShardGroup reports whether name is a shard's group (orders*2) or its dead-letter queue.
func isShardGroup(name string) bool {
	_, _, ok := shard.Parse(strings.TrimSuffix(name, dlqSuffix))
	return ok
}

// shardGroup is the group of shard i of queue (a sharded queue or its dead-letter queue).
func shardGroup(queue string, i uint32) string {
	if q, ok := strings.CutSuffix(queue, dlqSuffix); ok {
		return shard.Name(q, i) + dlqSuffix
	}
	return shard.Name(queue, i)
}

// groupOf is the queue group a request about queue acts on: queue itself, or with ?shard=i the
// group of its shard i.
func groupOf(b *broker.Broker, queue string, r *http.Request) (string, *httpError) {
	if !r.URL.Query().Has(shardParam) {
		return queue, nil
	}
	s := r.URL.Query().Get(shardParam)
	n := b.ShardCount(queue)
	i, err := strconv.ParseUint(s, 10, 32)
	switch {
	case n == 0:
		herr := refuse(http.StatusNotFound, "queue %q does not exist", queue)
		herr.code = broker.CodeQueueNotFound.String()
		return "", herr
	case isShardGroup(queue):
		return "", refuse(http.StatusBadRequest, "shard=%s: %q is a shard's group already; name its queue", s, queue)
	case err != nil || i >= uint64(n):
		return "", refuse(http.StatusBadRequest, "shard=%q: queue %q has shards 0 to %d", s, queue, n-1)
	}
	return shardGroup(queue, uint32(i)), nil
}

// target is the queue a request names, once p holds one of kinds on it, and the group it acts on.
func target(b *broker.Broker, p *auth.Principal, r *http.Request, kinds ...auth.Kind) (queue, group string, herr *httpError) {
	queue = r.PathValue("queue")
	if herr = permitted(p, queue, kinds...); herr != nil {
		return "", "", herr
	}
	group, herr = groupOf(b, queue, r)
	return queue, group, herr
}

// onShard serves r about shard i, with the query's set values replaced and body as its body, as
// a client's request; it returns the answer.
func (api *adminAPI) onShard(r *http.Request, i uint32, set map[string]string, body []byte) rawAnswer {
	u := *r.URL
	q := u.Query()
	for k, v := range set {
		if v == "" {
			q.Del(k)
			continue
		}
		q.Set(k, v)
	}
	q.Set(shardParam, strconv.FormatUint(uint64(i), 10))
	u.RawQuery = q.Encode()
	sub, err := http.NewRequestWithContext(r.Context(), r.Method, u.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return rawAnswer{status: http.StatusInternalServerError, body: []byte(`{"error":"` + err.Error() + `"}`)}
	}
	sub.RemoteAddr, sub.Host = r.RemoteAddr, r.Host
	for _, name := range forwardedHeaders {
		for _, v := range r.Header.Values(name) {
			sub.Header.Add(name, v)
		}
	}
	rec := &recorder{h: http.Header{}}
	api.ServeHTTP(rec, sub)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rawAnswer{status: rec.status, contentType: rec.h.Get("Content-Type"), body: rec.buf.Bytes()}
}

// decode reads a shard's answer into out; a refusal is returned as the shard's, prefixed with
// what.
func (a rawAnswer) decode(i uint32, out any) *httpError {
	if a.status != http.StatusOK {
		var e struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		_ = json.Unmarshal(a.body, &e)
		herr := refuse(a.status, "shard %d: %s", i, e.Error)
		herr.code = e.Code
		return herr
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return refuse(http.StatusInternalServerError, "shard %d answered what is not JSON: %v", i, err)
	}
	return nil
}

// writeRaw answers a as a shard gave it.
func writeRaw(w http.ResponseWriter, a rawAnswer) {
	if a.contentType != "" {
		w.Header().Set("Content-Type", a.contentType)
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// oneMessage answers a request about one message of a sharded queue: the shard its ID names does.
func oneMessage(api *adminAPI, b *broker.Broker, p *auth.Principal, r *http.Request, n uint32) (any, *httpError) {
	queue := r.PathValue("queue")
	if herr := permitted(p, queue, auth.Admin, auth.Consume); herr != nil {
		return nil, herr
	}
	id, herr := messageID(r.PathValue("id"))
	if herr != nil {
		return nil, herr
	}
	var body []byte
	if r.Body != nil {
		body = readAll(r)
	}
	return api.onShard(r, shard.IndexOf(id, n), nil, body), nil
}

// readAll is r's body, at most maxBodyBytes of it.
func readAll(r *http.Request) []byte {
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	return buf.Bytes()
}

// purgeShards purges every shard of a sharded queue (or of its dead-letter queue) in turn.
func purgeShards(api *adminAPI, b *broker.Broker, p *auth.Principal, r *http.Request, n uint32) (any, *httpError) {
	queue := r.PathValue("queue")
	if herr := permitted(p, queue, auth.Admin); herr != nil {
		return nil, herr
	}
	var total uint64
	for i := range n {
		var res struct {
			Purged uint64 `json:"purged"`
		}
		if herr := api.onShard(r, i, nil, []byte("{}")).decode(i, &res); herr != nil {
			herr.msg += "; " + strconv.FormatUint(total, 10) + " messages of the shards before it were purged"
			return nil, herr
		}
		total += res.Purged
	}
	return map[string]any{"queue": queue, "purged": total, "shards": n}, nil
}

// redriveShards redrives every shard's dead-letter queue of a sharded queue in turn, up to count in
// all; each message goes back to its own shard.
func redriveShards(api *adminAPI, b *broker.Broker, p *auth.Principal, r *http.Request, n uint32) (any, *httpError) {
	dlq := r.PathValue("queue")
	if !strings.HasSuffix(dlq, dlqSuffix) {
		dlq += dlqSuffix
	}
	if herr := permitted(p, dlq, auth.Admin); herr != nil {
		return nil, herr
	}
	var req redriveRequest
	if herr := readJSON(r, &req); herr != nil {
		return nil, herr
	}
	if _, herr := reclassifyOf(req.Reclassify); herr != nil {
		return nil, herr
	}
	var sum redriveSum
	left := req.Count
	for i := range n {
		body, _ := json.Marshal(redriveRequest{Count: left, Reclassify: req.Reclassify})
		var res redriveSum
		if herr := api.onShard(r, i, nil, body).decode(i, &res); herr != nil {
			herr.msg += "; " + strconv.FormatUint(sum.Redriven, 10) + " messages of the shards before it were redriven"
			return nil, herr
		}
		sum.Redriven += res.Redriven
		sum.LeftUnclassified += res.LeftUnclassified
		sum.RejectedByScript += res.RejectedByScript
		if req.Count > 0 {
			if left -= min(left, res.Redriven); left == 0 {
				break
			}
		}
	}
	return map[string]any{"queue": dlq, "redriven": sum.Redriven, "left_unclassified": sum.LeftUnclassified,
		"rejected_by_script": sum.RejectedByScript}, nil
}

// redriveSum is a redrive's figures.
type redriveSum struct {
	Redriven         uint64 `json:"redriven"`
	LeftUnclassified uint64 `json:"left_unclassified"`
	RejectedByScript uint64 `json:"rejected_by_script"`
}
