package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// A refused admin request prints the server's reason, not only the error code's description.
func TestCLIAdminRefusalsSayWhy(t *testing.T) {
	t.Parallel()
	q := queueName(t)
	r := cli(t, "", "queue", "create", q, "--visibility-timeout", "13h")
	wantCLIError(t, r, 1, "visibility_timeout_ms 46800000 exceeds 12 hours (InvalidConfigValue)")
	r = cli(t, "", "queue", "create", "a b")
	wantCLIError(t, r, 1, `queue name "a b" must be 1 to 255 bytes`)

	c := dial(t, "")
	createQueue(t, c, fila.QueueConfig{Name: q})
	wantCLIError(t, cli(t, "", "queue", "update", q, "--visibility-timeout", "13h"), 1, "exceeds 12 hours (InvalidConfigValue)")
	wantCLIError(t, cli(t, "", "key", "create", ""), 1, `key name "" must be`)
}

// An Enqueue refused by the ACL names the key and the permission it lacks.
func TestCLIRefusedEnqueueNamesKeyAndPermission(t *testing.T) {
	t.Parallel()
	s := authServer(t)
	boot := func(args ...string) string {
		return cliOK(t, s.addr, append([]string{"--api-key", bootstrapKey}, args...)...)
	}
	boot("queue", "create", "orders")
	var k fila.APIKey
	if err := json.Unmarshal([]byte(boot("key", "create", "reader", "--json")), &k); err != nil {
		t.Fatal(err)
	}
	boot("acl", "set", k.ID, "consume:orders")
	r := cli(t, s.addr, "--api-key", k.Key, "enqueue", "orders", "hello")
	wantCLIError(t, r, 1, "API key "+k.ID+` has no produce permission on queue "orders" (Forbidden)`)

	// Through the SDK: one message of two refused; its error names the permission and the queue.
	boot("acl", "set", k.ID, "produce:orders")
	w, err := dialKey(t, s.addr, k.Key)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := w.Enqueue(testCtx(t), fila.Message{Queue: "orders", Payload: []byte("a")}, fila.Message{Queue: "other", Payload: []byte("b")})
	if err != nil || len(rs) != 2 || rs[0].Err != nil {
		t.Fatalf("enqueue: %+v %v", rs, err)
	}
	if msg := rs[1].Err.Error(); msg != `fila: the API key has no produce permission on queue "other" (Forbidden)` {
		t.Fatalf("refused item: %s", msg)
	}
}

// fila queue delete refuses a queue that holds messages or has consumers, unless --force.
func TestCLIQueueDeleteRefusesABusyQueue(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fastQueue(30*time.Second, 1))
	stillThere := func() {
		t.Helper()
		if _, err := c.GetStats(testCtx(t), q); err != nil {
			t.Fatalf("the refused delete deleted the queue: %v", err)
		}
	}

	enqueue(t, c, fila.Message{Queue: q, Payload: []byte("kept")})
	wantCLIError(t, cli(t, "", "queue", "delete", q), 1, `queue "`+q+`" holds 1 messages (0 leased) and has 0 consumers: not deleted; pass --force`)
	stillThere()

	// Emptied, but with a consumer.
	cons := consume(t, c, q, fila.ConsumeOptions{})
	ack(t, next(t, cons))
	waitStats(t, c, q, "empty with a consumer", func(s *fila.QueueStats) bool { return s.Depth+s.InFlight == 0 && s.ActiveConsumers == 1 })
	wantCLIError(t, cli(t, "", "queue", "delete", q), 1, "and has 1 consumers")
	stillThere()
	cons.Close()
	waitStats(t, c, q, "no consumer", func(s *fila.QueueStats) bool { return s.ActiveConsumers == 0 })

	// A message in the dead-letter queue counts too.
	enqueue(t, c, fila.Message{Queue: q, Payload: []byte("dead")})
	cons = consume(t, c, q, fila.ConsumeOptions{})
	d := next(t, cons)
	if err := d.Nack(testCtx(t), "boom", nil); err != nil { // its only attempt: dead-lettered
		t.Fatal(err)
	}
	cons.Close()
	waitStats(t, c, q+".dlq", "dead-lettered", func(s *fila.QueueStats) bool { return s.Depth == 1 })
	waitStats(t, c, q, "no consumer", func(s *fila.QueueStats) bool { return s.ActiveConsumers == 0 && s.Depth == 0 })
	wantCLIError(t, cli(t, "", "queue", "delete", q), 1, `queue "`+q+`.dlq" holds 1 messages`)
	stillThere()

	if out := cliOK(t, "", "queue", "delete", "--force", q); out != `queue "`+q+`" deleted`+"\n" {
		t.Fatalf("delete --force: %q", out)
	}
	wantCLIError(t, cli(t, "", "queue", "delete", q), 1, "(QueueNotFound)")
}
