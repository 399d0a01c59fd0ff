package session

import (
	"fmt"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
)

// Every list of an admin answer is cut to MaxListBytes of whole entries, in its order; an answer
// that fits is left as it is.
func TestBoundCutsEveryList(t *testing.T) {
	big := strings.Repeat("x", 60_000)
	name := func(i int) string { return fmt.Sprintf("%03d", i) + big }
	const n = 100 // 6 MB of each
	stats, queues, config := &fibp.GetStatsResult{}, &fibp.ListQueuesResult{}, &fibp.ListConfigResult{}
	keys, throttles := &fibp.ListAPIKeysResult{}, &fibp.GetThrottleStatsResult{}
	for i := range n {
		stats.ActiveThrottles = append(stats.ActiveThrottles, fibp.ThrottleSummary{Name: name(i)})
		queues.Queues = append(queues.Queues, fibp.QueueInfo{Name: name(i)})
		config.Entries = append(config.Entries, fibp.ConfigEntry{Key: name(i)})
		keys.Keys = append(keys.Keys, fibp.APIKeyInfo{KeyID: name(i)})
		throttles.Queues = append(throttles.Queues, fibp.QueueRef{Queue: name(i)})
		throttles.Buckets = append(throttles.Buckets, fibp.BucketStats{Values: []string{name(i)}})
	}
	lists := map[string]func() (int, int, string){ // listed, encoded bytes, first entry's name
		"GetStats throttles": func() (int, int, string) {
			return len(stats.ActiveThrottles), sizeOf(stats.ActiveThrottles), stats.ActiveThrottles[0].Name
		},
		"ListQueues":  func() (int, int, string) { return len(queues.Queues), sizeOf(queues.Queues), queues.Queues[0].Name },
		"ListConfig":  func() (int, int, string) { return len(config.Entries), sizeOf(config.Entries), config.Entries[0].Key },
		"ListApiKeys": func() (int, int, string) { return len(keys.Keys), sizeOf(keys.Keys), keys.Keys[0].KeyID },
		"GetThrottleStats queues": func() (int, int, string) {
			return len(throttles.Queues), sizeOf(throttles.Queues), throttles.Queues[0].Queue
		},
		"GetThrottleStats buckets": func() (int, int, string) {
			return len(throttles.Buckets), sizeOf(throttles.Buckets), throttles.Buckets[0].Values[0]
		},
	}
	for _, f := range []fibp.Frame{stats, queues, config, keys, throttles} {
		Bound(f)
	}
	for what, list := range lists {
		listed, size, first := list()
		if size > MaxListBytes || listed == 0 || listed == n || first != name(0) {
			t.Errorf("%s: %d of %d entries listed, %d bytes (bound %d), first %.3q", what, listed, n, size, MaxListBytes, first)
		}
		if size+60_100 <= MaxListBytes {
			t.Errorf("%s: %d bytes listed: one more entry would have fit %d", what, size, MaxListBytes)
		}
	}

	small := &fibp.ListQueuesResult{Queues: []fibp.QueueInfo{{Name: "b"}, {Name: "a"}}}
	Bound(small)
	if len(small.Queues) != 2 || small.Queues[0].Name != "b" {
		t.Fatalf("an answer that fits was changed: %+v", small.Queues)
	}
}

func sizeOf[T any, P interface {
	*T
	Size() int
}](s []T) int {
	n := 0
	for i := range s {
		n += P(&s[i]).Size()
	}
	return n
}
