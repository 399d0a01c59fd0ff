package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// A dead-lettered message says why in its headers: the SDK's Delivery and fila consume of the DLQ
// show the reason, the Nack's error, the queue and the attempt count; a message expired by the
// queue's retention says expired.
func TestCLIConsumeShowsWhyAMessageWasDeadLettered(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fastQueue(30*time.Second, 1))
	order := map[string]string{"order": "42"}
	enqueue(t, c, fila.Message{Queue: q, Headers: order, Payload: []byte("a")}, fila.Message{Queue: q, Headers: order, Payload: []byte("b")})
	cons := consume(t, c, q, fila.ConsumeOptions{})
	for range 2 {
		if err := next(t, cons).Nack(testCtx(t), "card declined", nil); err != nil {
			t.Fatal(err)
		}
	}
	cons.Close()
	waitStats(t, c, q+".dlq", "dead-lettered", func(s *fila.QueueStats) bool { return s.Depth == 2 })

	out := cliOK(t, "", "consume", q+".dlq", "--count", "1", "--ack")
	for _, want := range []string{`fila-dead-letter-reason="max_attempts"`, `fila-dead-letter-error="card declined"`,
		`fila-dead-letter-queue="` + q + `"`, `fila-dead-letter-attempts="1"`, `fila-dead-letter-at="`, `order="42"`} {
		if !strings.Contains(out, want) {
			t.Errorf("fila consume %s.dlq does not show %s:\n%s", q, want, out)
		}
	}
	d := next(t, consume(t, c, q+".dlq", fila.ConsumeOptions{}))
	if d.Headers[fila.HeaderDeadLetterReason] != "max_attempts" || d.Headers[fila.HeaderDeadLetterError] != "card declined" ||
		d.Headers[fila.HeaderDeadLetterQueue] != q || d.Headers["order"] != "42" {
		t.Errorf("the SDK's Delivery headers: %v", d.Headers)
	}
	ack(t, d)

	// Retention: expired.
	q2 := createQueue(t, c, fila.QueueConfig{})
	cliOK(t, "", "config", "set", "queue."+q2+".retention_ms", "1")
	enqueue(t, c, fila.Message{Queue: q2, Payload: []byte("old")})
	waitStats(t, c, q2+".dlq", "expired", func(s *fila.QueueStats) bool { return s.Depth == 1 })
	out = cliOK(t, "", "consume", q2+".dlq", "--count", "1", "--ack")
	if !strings.Contains(out, `fila-dead-letter-reason="expired"`) || !strings.Contains(out, `fila-dead-letter-error="expired: `) {
		t.Errorf("fila consume of an expired message:\n%s", out)
	}
}
