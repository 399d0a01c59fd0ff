package main

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/service"
)

// Throttles (GetThrottleStats, GetThrottleBucket):
//
//	GET /api/v1/throttles?top=N                         every throttle the caller may read, with its N most-waiting buckets
//	GET /api/v1/throttles/{name}/buckets?after=K&limit=N  its buckets holding messages, by key, paged
//
// A throttle needs the throttle permission on its name, as FIBP's throttle requests do; the
// queues a throttle is active on are listed only as far as the caller may see them.

const (
	defaultTop       = 5
	maxTop           = 100
	defaultBuckets   = 100
	maxBucketsPage   = 1000
	maxBucketsListed = 10_000 // the most-waiting buckets a listing pages through
)

func (api *adminAPI) throttleRoutes() {
	api.mux.HandleFunc("GET "+apiPath+"throttles", api.handle(throttles))
	api.mux.HandleFunc("GET "+apiPath+"throttles/{name}/buckets", api.handle(throttleBuckets))
}

type throttleJSON struct {
	Name           string       `json:"name"`
	Limits         []limitJSON  `json:"limits"` // the effective limits
	Key            string       `json:"key"`    // its parts, comma-separated; empty for an unkeyed throttle
	WhenKeyMissing string       `json:"when_key_missing"`
	Subscribers    int          `json:"subscribers"`
	Queues         []string     `json:"queues"`
	ActiveBuckets  uint64       `json:"active_buckets"`
	BucketsAtLimit uint64       `json:"buckets_at_limit"`
	Waiting        uint64       `json:"waiting"` // messages held by the throttle, across queues
	Buckets        []bucketJSON `json:"buckets"`
}

type limitJSON struct {
	Max      uint64 `json:"max"`
	WindowMs uint64 `json:"window_ms"`
}

type bucketJSON struct {
	// Key is the bucket's values joined by commas; Values the values themselves; Missing marks
	// the shared bucket of messages without the key.
	Key     string   `json:"key"`
	Values  []string `json:"values"`
	Missing bool     `json:"missing,omitempty"`
	// Counted has one count per limit, in the order of Limits: the deliveries inside its window.
	Counted []uint64    `json:"counted"`
	Limits  []limitJSON `json:"limits"`
	Waiting uint64      `json:"waiting"`
	// NextRoomAt is when one more delivery fits every limit (Unix ms); 0 when it fits now.
	NextRoomAt int64 `json:"next_room_at"`
}

func throttles(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	top, herr := pageLimit(r, "top", defaultTop, maxTop)
	if herr != nil {
		return nil, herr
	}
	out := []throttleJSON{}
	for _, name := range b.ThrottleNames() {
		if !p.Allowed(auth.Throttle, name) {
			continue
		}
		st, e := b.GetThrottleStats(name, uint32(top))
		if e != nil {
			continue // it ended meanwhile
		}
		out = append(out, toThrottleJSON(p, &st))
	}
	return map[string]any{"throttles": out}, nil
}

func toThrottleJSON(p *auth.Principal, st *service.ThrottleStats) throttleJSON {
	s := &st.Summary
	t := throttleJSON{Name: s.Name, Limits: limitsJSON(s), WhenKeyMissing: s.WhenKeyMissing.String(), Subscribers: s.Subscribers,
		Queues: []string{}, ActiveBuckets: s.ActiveBuckets, BucketsAtLimit: s.BucketsAtLimit, Waiting: st.Waiting,
		Buckets: make([]bucketJSON, len(st.Buckets))}
	parts := make([]string, len(s.Key))
	for i, k := range s.Key {
		parts[i] = k.String()
	}
	t.Key = strings.Join(parts, ",")
	for _, q := range s.Queues {
		if p.Any(q) {
			t.Queues = append(t.Queues, q)
		}
	}
	for i := range st.Buckets {
		t.Buckets[i] = toBucketJSON(&st.Buckets[i], t.Limits)
	}
	return t
}

func limitsJSON(s *service.ThrottleSummary) []limitJSON {
	out := make([]limitJSON, len(s.Limits))
	for i, l := range s.Limits {
		out[i] = limitJSON{Max: uint64(l.Max), WindowMs: uint64(l.WindowMs)}
	}
	return out
}

func toBucketJSON(b *service.ThrottleBucket, limits []limitJSON) bucketJSON {
	j := bucketJSON{Key: strings.Join(b.Values, ","), Values: b.Values, Missing: b.Missing, Counted: b.Counted, Limits: limits,
		Waiting: b.Waiting, NextRoomAt: b.NextRoomAt}
	if j.Values == nil {
		j.Values = []string{}
	}
	if j.Counted == nil {
		j.Counted = []uint64{}
	}
	return j
}

// throttleBuckets pages through a throttle's buckets that hold messages (at most the
// maxBucketsListed most-waiting ones), ordered by key; the shared bucket of messages missing
// the key comes last, as key "*missing*" for after=.
func throttleBuckets(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	name := r.PathValue("name")
	if !p.Allowed(auth.Throttle, name) {
		return nil, refuse(http.StatusForbidden, "API key %s lacks the throttle permission on throttle %q", p.ID(), name)
	}
	limit, herr := pageLimit(r, "limit", defaultBuckets, maxBucketsPage)
	if herr != nil {
		return nil, herr
	}
	after, hasAfter := r.URL.Query().Get("after"), r.URL.Query().Has("after")
	st, e := b.GetThrottleStats(name, maxBucketsListed)
	if e != nil {
		return nil, brokerRefusal(e)
	}
	limits := limitsJSON(&st.Summary)
	all := make([]bucketJSON, len(st.Buckets))
	for i := range st.Buckets {
		all[i] = toBucketJSON(&st.Buckets[i], limits)
		if all[i].Missing {
			all[i].Key = missingBucket
		}
	}
	slices.SortFunc(all, func(x, y bucketJSON) int {
		if x.Missing != y.Missing {
			return cmp.Compare(bucketRank(x), bucketRank(y))
		}
		return strings.Compare(x.Key, y.Key)
	})
	start := 0
	if hasAfter {
		start, _ = slices.BinarySearchFunc(all, after, func(x bucketJSON, k string) int {
			if k == missingBucket {
				return cmp.Compare(bucketRank(x), 1)
			}
			if x.Missing {
				return 1
			}
			return strings.Compare(x.Key, k)
		})
		if start < len(all) && !all[start].Missing && all[start].Key == after {
			start++
		} else if start < len(all) && all[start].Missing && after == missingBucket {
			start++
		}
	}
	page := all[start:min(len(all), start+limit)]
	res := map[string]any{"throttle": name, "buckets": page, "total": len(all), "next": nil}
	if start+limit < len(all) {
		res["next"] = page[len(page)-1].Key
	}
	return res, nil
}

// missingBucket is the key the buckets listing gives the shared bucket of messages missing the
// throttle's key.
const missingBucket = "*missing*"

func bucketRank(b bucketJSON) int {
	if b.Missing {
		return 1
	}
	return 0
}
