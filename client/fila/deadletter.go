package fila

// Headers the broker adds to a message while it is in a dead-letter queue, saying why it is there
// (docs/dead-letter.md). Redrive delivers it without them.
const (
	// HeaderDeadLetterReason: max_attempts, script, unclassified, expired, max_depth; an open
	// set, so show an unknown reason as it is.
	HeaderDeadLetterReason = "fila-dead-letter-reason"
	// HeaderDeadLetterError: the error it was dead-lettered with (the last Nack's text, "lease
	// expired", the on_failure hook's or the queue limit's).
	HeaderDeadLetterError = "fila-dead-letter-error"
	// HeaderDeadLetterQueue: the queue it came from.
	HeaderDeadLetterQueue = "fila-dead-letter-queue"
	// HeaderDeadLetterAttempts: its attempt count when it was dead-lettered, in decimal.
	HeaderDeadLetterAttempts = "fila-dead-letter-attempts"
	// HeaderDeadLetterAt: when it was dead-lettered, Unix milliseconds in decimal.
	HeaderDeadLetterAt = "fila-dead-letter-at"
)
