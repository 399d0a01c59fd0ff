package e2e

import (
	"strings"
	"testing"

	"github.com/filamq/fila/client/fila"
)

// A producer's payload or header name reaches the terminal of whoever runs `fila consume`:
// control characters (an escape sequence that sets the title or writes the clipboard) are
// printed quoted, never as they are.
func TestCLIConsumeQuotesControlCharacters(t *testing.T) {
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{})
	const evil = "\x1b]52;c;b3duZWQ=\x07\x1b[2Jhi"
	enqueue(t, c, fila.Message{Queue: q, Payload: []byte(evil), Headers: map[string]string{"k\x1b[31m": "v"}},
		fila.Message{Queue: q, Payload: []byte("plain\ttext")}, fila.Message{Queue: q, FairnessKey: "t\x1b]0;x\x07"})
	if out := cliOK(t, "", "queue", "stats", q); strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `"t\x1b]0;x\a"`) {
		t.Fatalf("queue stats printed a fairness key with its control characters: %q", out)
	}
	out := cliOK(t, "", "consume", q, "--ack", "--count", "3")
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Fatalf("consume printed control characters: %q", out)
	}
	if !strings.Contains(out, `"\x1b]52;c;b3duZWQ=\a\x1b[2Jhi"`) || !strings.Contains(out, `"k\x1b[31m"="v"`) || !strings.Contains(out, "\nplain\ttext\n") {
		t.Fatalf("consume printed:\n%s", out)
	}
}
