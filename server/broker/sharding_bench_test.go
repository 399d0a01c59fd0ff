package broker

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/service"
	"github.com/filamq/fila/server/storage"
)

// BenchmarkShardMessages measures what sharding adds to an Enqueue of 100 messages before it is
// routed: for a queue that is not sharded, one catalog lookup; for a 4-shard grouped queue, the
// ordering group's evaluation and hash of each message.
func BenchmarkShardMessages(b *testing.B) {
	br, err := Open(Options{Store: storage.NewMem(), IdleTimeout: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	if e := br.CreateQueue(QueueSpec{Name: "plain"}); e != nil {
		b.Fatal(e)
	}
	if e := br.CreateQueue(QueueSpec{Name: "sharded", Shards: 4, Ordering: service.OrderingGrouped,
		OrderingKey: keys.Key{{Kind: keys.Header, Name: "g"}}}); e != nil {
		b.Fatal(e)
	}
	for _, q := range []string{"plain", "sharded"} {
		b.Run(q, func(b *testing.B) {
			msgs := make([]Message, 100)
			for i := range msgs {
				msgs[i] = Message{Headers: map[string]string{"g": fmt.Sprint("g", i%16)}}
			}
			for b.Loop() {
				for i := range msgs {
					msgs[i].Queue = q
				}
				br.shardMessages(msgs)
			}
		})
	}
}
