package main

import (
	"net/http"
	"strings"

	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/service"
)

//	POST /api/v1/queues/{queue}/redrive  {"count": N, "reclassify": 0|1|2}
//
// moves up to count (0 or absent: all) dead-lettered messages of the queue's dead-letter queue
// back to the queue, as FIBP's Redrive does; {queue} names the queue or its dead-letter queue.
// It needs admin on the dead-letter queue's name, as Redrive does. A sharded queue's is redriven
// shard by shard, up to count in all (redriveShards); ?shard=i redrives shard i's alone.

func (api *adminAPI) redriveRoutes() {
	api.mux.HandleFunc("POST "+queuesPath+"{queue}/redrive", untimedFunc(api.handleQueue(redrive, redriveShards)))
}

// redriveRequest is a redrive's body; Reclassify is 0 (all), 1 (unclassified only) or 2 (none),
// or the names "all", "unclassified_only", "none".
type redriveRequest struct {
	Count      uint64 `json:"count"`
	Reclassify any    `json:"reclassify"`
}

func redrive(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	dlq := r.PathValue("queue")
	if !strings.HasSuffix(dlq, dlqSuffix) {
		dlq += dlqSuffix
	}
	if herr := permitted(p, dlq, auth.Admin); herr != nil {
		return nil, herr
	}
	group, herr := groupOf(b, dlq, r)
	if herr != nil {
		return nil, herr
	}
	var req redriveRequest
	if herr := readJSON(r, &req); herr != nil {
		return nil, herr
	}
	rc, herr := reclassifyOf(req.Reclassify)
	if herr != nil {
		return nil, herr
	}
	res, e := b.Redrive(group, req.Count, rc)
	if e != nil {
		return nil, brokerRefusal(e)
	}
	return map[string]any{"queue": dlq, "redriven": res.Redriven, "left_unclassified": res.LeftUnclassified,
		"rejected_by_script": res.RejectedByScript}, nil
}

func reclassifyOf(v any) (service.Reclassify, *httpError) {
	switch v := v.(type) {
	case nil:
		return service.ReclassifyAll, nil
	case float64:
		if v == float64(int(v)) && v >= 0 && service.Reclassify(v).Known() {
			return service.Reclassify(v), nil
		}
	case string:
		for rc := service.ReclassifyAll; rc.Known(); rc++ {
			if rc.String() == v {
				return rc, nil
			}
		}
	}
	return 0, refuse(http.StatusBadRequest, "reclassify %v: want 0 (all), 1 (unclassified_only) or 2 (none)", v)
}
