package fila_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// BenchmarkEnqueueBatch sends batches of 100 messages of 1 KB to the test broker (a fila-server
// subprocess) from 16 goroutines, through a Client and through a Cluster seeded with that one node,
// and reports, beside the time per batch, the CPU this process (the SDK, not the broker) spent
// per message: the figure the cluster SDK's route hints must keep close to the Client's.
//
//	go test ./client/fila -run '^$' -bench EnqueueBatch -benchtime 3s
func BenchmarkEnqueueBatch(b *testing.B) {
	ctx := context.Background()
	c, err := fila.Dial(ctx, brokerAddr, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const queue = "bench-enqueue-batch"
	if _, err := c.CreateQueue(ctx, fila.QueueConfig{Name: queue}); err != nil && !errors.Is(err, fila.ErrQueueAlreadyExists) {
		b.Fatal(err)
	}
	cl, err := fila.DialCluster(ctx, []string{brokerAddr}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	payload := make([]byte, 1024)
	batch := make([]fila.Message, 100)
	for i := range batch {
		batch[i] = fila.Message{Queue: queue, Payload: payload}
	}
	for _, s := range []struct {
		name    string
		enqueue func(context.Context, ...fila.Message) ([]fila.EnqueueResult, error)
	}{{"client", c.Enqueue}, {"cluster", cl.Enqueue}} {
		b.Run(s.name, func(b *testing.B) {
			b.SetParallelism(8) // 16 calls in flight on two cores, as the compare tool's 4×4
			cpu0 := selfCPU(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := s.enqueue(ctx, batch...)
					if err == nil && res[0].Err != nil {
						err = res[0].Err
					}
					if err != nil {
						panic(fmt.Sprint("enqueue: ", err)) // RunParallel's goroutines may not call b.Fatal
					}
				}
			})
			b.ReportMetric(float64((selfCPU(b)-cpu0).Nanoseconds())/1e3/float64(b.N*len(batch)), "sdk-µs/msg")
		})
	}
}

// selfCPU is the user and system CPU this process used so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Skip("no getrusage: ", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
