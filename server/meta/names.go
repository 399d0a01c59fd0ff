package meta

import (
	"strings"
	"unicode/utf8"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/auth"
)

// DeadLetterSuffix ends every dead-letter queue's name: queue q's is q + DeadLetterSuffix. Names
// with it are reserved: no CreateQueue may take one.
const DeadLetterSuffix = ".dlq"

// DeadLetterName is the name of queue's dead-letter queue.
func DeadLetterName(queue string) string { return queue + DeadLetterSuffix }

// ValidQueueName reports whether name may name a queue: 1 to 255 bytes of UTF-8 without spaces,
// *, control or bidi-override characters.
func ValidQueueName(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	return utf8.ValidString(name) && !strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == '*' || auth.Unsafe(r) })
}

// deadLetterRecord is the definition a dead-letter queue is created with: it belongs to queue.
func deadLetterRecord(queue *store.QueueRecord) store.QueueRecord {
	return store.QueueRecord{Name: DeadLetterName(queue.Name), CreatedAt: queue.CreatedAt, DLQOf: queue.Name}
}
