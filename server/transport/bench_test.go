package transport

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/filamq/fila/generated/fibp"
)

// BenchmarkEnqueueAccounting is the hot path — batched Enqueue of 100 × 1 KB, four connections —
// with memory accounting on and off, in one process so that the two alternate on the same
// machine load: go test -run X -bench EnqueueAccounting -count 10 ./server/transport/
func BenchmarkEnqueueAccounting(b *testing.B) {
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, mode := range []struct {
		name string
		off  bool
	}{{"on", false}, {"off", true}} {
		b.Run(mode.name, func(b *testing.B) {
			_, addr := startServer(b, Options{NoMemoryAccounting: mode.off})
			admin := dialRaw(b, addr)
			admin.Handshake()
			if r := admin.Call(1, &fibp.CreateQueue{Name: "bench"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
				b.Fatalf("CreateQueue: %+v", r)
			}
			msgs := make([]fibp.EnqueueMessage, 100)
			for i := range msgs {
				msgs[i] = fibp.EnqueueMessage{Queue: "bench", Payload: make([]byte, 1024)}
			}
			frame := fibp.AppendFrame(nil, 0, 7, &fibp.Enqueue{Messages: msgs})
			b.SetBytes(int64(len(frame)))
			b.ResetTimer()
			b.SetParallelism(2) // four connections on two cores
			b.RunParallel(func(pb *testing.PB) {
				c := dialRaw(b, addr)
				c.Handshake()
				for pb.Next() {
					c.SendBytes(frame)
					if _, f := c.Next(); f.Opcode() != fibp.OpEnqueueResult {
						panic(fmt.Sprintf("Enqueue answered %v", f.Opcode()))
					}
				}
			})
			b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "msg/s")
		})
	}
}
