package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/service"
)

// The merged views of a sharded queue (docs/sharding.md, "The whole queue"): its messages and
// its fairness keys, each shard's page asked for and the pages merged here, and a key's
// explanation.

// peekShards is a peek of a sharded queue: each shard's messages in its enqueue order, the
// shards interleaved by message ID (a UUIDv7: the time its shard's leader stored it, to the
// millisecond), so by ID while each shard's enqueue order is its ID order. Each shard is asked
// for up to count messages after its cursor, and the first count of their merge are the page,
// cut at broker.MaxPeekBytes of payload as a shard's page is: a page reads at most count messages
// from each shard. The page's next is a cursor of one entry per shard, comma-separated (the last
// ID shown from that shard, or the entry it had; empty: from its start), with which no message
// is shown twice or skipped. A single ID as after= continues, in the shard it names, after that
// message; in every other shard, from its first message with a larger ID. Each message's queue is
// its shard's group (orders*2).
func peekShards(api *adminAPI, b *broker.Broker, p *auth.Principal, r *http.Request, n uint32) (any, *httpError) {
	queue := r.PathValue("queue")
	if herr := permitted(p, queue, auth.Admin, auth.Consume); herr != nil {
		return nil, herr
	}
	count := broker.DefaultPeekCount
	if s := r.URL.Query().Get("count"); s != "" {
		c, err := strconv.Atoi(s)
		if err != nil || c < 1 || c > broker.MaxPeekCount {
			return nil, refuse(http.StatusBadRequest, "count=%q: want a number from 1 to %d", s, broker.MaxPeekCount)
		}
		count = c
	}
	cursors, herr := peekCursors(r.URL.Query().Get("after"), n)
	if herr != nil {
		return nil, herr
	}
	pages := make([]pageJSON, n)
	for i := range n {
		if herr := api.onShard(r, i, map[string]string{"after": cursors[i]}, nil).decode(i, &pages[i]); herr != nil {
			return nil, herr
		}
	}
	return mergePages(queue, pages, cursors, count), nil
}

// peekCursors are the shards' cursors of a sharded peek's after= (a single ID, or one entry per
// shard, comma-separated).
func peekCursors(after string, n uint32) ([]string, *httpError) {
	cursors := make([]string, n)
	if !strings.Contains(after, ",") {
		for i := range cursors {
			cursors[i] = after
		}
	} else if cursors = strings.Split(after, ","); len(cursors) != int(n) {
		return nil, refuse(http.StatusBadRequest, "after=%q: a cursor of a queue of %d shards has %d comma-separated entries", after, n, n)
	}
	for _, c := range cursors {
		if c == "" {
			continue
		}
		if _, herr := messageID(c); herr != nil {
			return nil, herr
		}
	}
	return cursors, nil
}

// mergePages merges the shards' pages, asked after cursors, by message ID into a page of up to
// count messages (and at most broker.MaxPeekBytes of payload, its first message whole).
func mergePages(queue string, pages []pageJSON, cursors []string, count int) pageJSON {
	out := pageJSON{Queue: queue, Messages: []messageJSON{}}
	at := make([]int, len(pages))
	more, total := false, 0
	for len(out.Messages) < count {
		next := -1
		for i := range pages {
			if at[i] < len(pages[i].Messages) && (next < 0 || pages[i].Messages[at[i]].ID < pages[next].Messages[at[next]].ID) {
				next = i // IDs are lower-case 8-4-4-4-12 hexadecimal: they sort as their bytes
			}
		}
		if next < 0 {
			break
		}
		m := pages[next].Messages[at[next]]
		if total += m.Size; len(out.Messages) > 0 && total > broker.MaxPeekBytes {
			more = true
			break
		}
		out.Messages = append(out.Messages, m)
		at[next]++
	}
	next := slices.Clone(cursors)
	for i := range pages {
		more = more || at[i] < len(pages[i].Messages) || pages[i].Next != ""
		if at[i] > 0 {
			next[i] = pages[i].Messages[at[i]-1].ID
		}
	}
	if more && len(out.Messages) > 0 {
		out.Next = strings.Join(next, ",")
	}
	return out
}

// keysShards is the fairness-key list of a sharded queue: the shards' lists merged in the list's
// order, their totals and deliveries summed. A key whose messages sit in several shards (a
// grouped or deduplicated queue's, or messages sent with an idempotency key) is listed once per
// shard, each row with that shard's figures. The page's next is a cursor of the last key shown
// from each shard (keyCursorPrefix, then their JSON array in unpadded base64url); after= takes it,
// or with sort=name a key's name.
func keysShards(api *adminAPI, b *broker.Broker, p *auth.Principal, r *http.Request, n uint32) (any, *httpError) {
	queue := r.PathValue("queue")
	if herr := permitted(p, queue, auth.Admin, auth.Consume); herr != nil {
		return nil, herr
	}
	limit, herr := pageLimit(r, "limit", service.DefaultKeyPage, service.MaxKeyPage)
	if herr != nil {
		return nil, herr
	}
	sort, herr := oneOf(r, "sort", "backlog", "deliveries", "name")
	if herr != nil {
		return nil, herr
	}
	cursors, herr := keyCursors(queue, r.URL.Query().Get("after"), sort, n)
	if herr != nil {
		return nil, herr
	}
	out := keyPageJSON{Keys: []service.KeyRow{}}
	pages := make([]keyPageJSON, n)
	for i := range n {
		if herr := api.onShard(r, i, map[string]string{"after": cursors[i]}, nil).decode(i, &pages[i]); herr != nil {
			return nil, herr
		}
		out.Total += pages[i].Total
		out.DeliveriesLastMinute += pages[i].DeliveriesLastMinute
		out.Asleep = out.Asleep || pages[i].Asleep
	}
	at := make([]int, n)
	for len(out.Keys) < limit {
		next := -1
		for i := range pages {
			if at[i] < len(pages[i].Keys) && (next < 0 || keyBefore(sort, &pages[i].Keys[at[i]], &pages[next].Keys[at[next]])) {
				next = i
			}
		}
		if next < 0 {
			break
		}
		out.Keys = append(out.Keys, pages[next].Keys[at[next]])
		at[next]++
	}
	more := false
	for i := range pages {
		more = more || at[i] < len(pages[i].Keys) || pages[i].Next != nil
		if at[i] > 0 {
			cursors[i] = pages[i].Keys[at[i]-1].Key
		}
	}
	if more && len(out.Keys) > 0 {
		raw, _ := json.Marshal(cursors)
		out.Next = nextOf(keyCursorPrefix + base64.RawURLEncoding.EncodeToString(raw))
	}
	return out, nil
}

// keyCursorPrefix begins the next of a sharded queue's key list.
const keyCursorPrefix = "shards:"

// keyCursors are the shards' cursors of a sharded key list's after= (a next, or with sort=name a
// key's name).
func keyCursors(queue, after, sort string, n uint32) ([]string, *httpError) {
	cursors := make([]string, n)
	if rest, ok := strings.CutPrefix(after, keyCursorPrefix); ok {
		raw, err := base64.RawURLEncoding.DecodeString(rest)
		if err != nil || json.Unmarshal(raw, &cursors) != nil || len(cursors) != int(n) {
			return nil, refuse(http.StatusBadRequest, "after=%q is not the next of a page of queue %q's keys", after, queue)
		}
		return cursors, nil
	}
	if after != "" && sort != "name" {
		return nil, refuse(http.StatusBadRequest, "after=%q: queue %q is sharded, and a key's place in its key list by %s differs from shard to shard: pass the next of the previous page, or sort=name", after, queue, sort)
	}
	for i := range cursors {
		cursors[i] = after
	}
	return cursors, nil
}

// keyBefore reports whether row a comes before row b in the key list sorted by sort (the
// engine's order: the larger backlog or deliveries first, then by name).
func keyBefore(sort string, a, b *service.KeyRow) bool {
	switch sort {
	case "backlog":
		if a.Backlog != b.Backlog {
			return a.Backlog > b.Backlog
		}
	case "deliveries":
		if a.DeliveriesLastMinute != b.DeliveriesLastMinute {
			return a.DeliveriesLastMinute > b.DeliveriesLastMinute
		}
	}
	return a.Key < b.Key
}

// explainKeyShards explains a fairness key of a sharded queue: the key's shard does, when the queue
// places messages by fairness key (broker.KeyShard); otherwise its messages may be in any shard,
// and the request must name one (?shard=i).
func explainKeyShards(api *adminAPI, b *broker.Broker, p *auth.Principal, r *http.Request, n uint32) (any, *httpError) {
	queue := r.PathValue("queue")
	if herr := permitted(p, queue, auth.Admin, auth.Consume); herr != nil {
		return nil, herr
	}
	key := r.PathValue("key")
	i, ok := b.KeyShard(queue, key)
	if !ok {
		return nil, refuse(http.StatusBadRequest, "queue %q places its messages by ordering group or dedup identity, so fairness key %q may have messages in any of its %d shards: name one with ?shard=i (0 to %d)", queue, key, n, n-1)
	}
	return api.onShard(r, i, nil, nil), nil
}
