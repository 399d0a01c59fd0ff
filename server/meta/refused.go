package meta

import "fmt"

// Code says why applying a command refused it.
type Code uint8

const (
	// CodeInvalidName: the name is not a valid queue name (ValidQueueName).
	CodeInvalidName Code = iota + 1
	// CodeReservedName: the name ends in DeadLetterSuffix.
	CodeReservedName
	// CodeQueueExists: the queue, or the dead-letter queue it would create, exists.
	CodeQueueExists
	// CodeQueueNotFound: the queue does not exist.
	CodeQueueNotFound
	// CodeDeadLetterQueue: the queue is a dead-letter queue, which is deleted only with its queue.
	CodeDeadLetterQueue
	// CodeTooManyQueues: as many queue groups as the command's max_queues exist already.
	CodeTooManyQueues
	// CodeInvalidDefinition: the definition does not decode, or changes what the queue is.
	CodeInvalidDefinition
	// CodeInvalidNode: a node without an ID.
	CodeInvalidNode
	// CodeNodeNotFound: no member has the ID.
	CodeNodeNotFound
	// CodeNodeNotDrained: a member removed without force is not draining.
	CodeNodeNotDrained
	// CodeLastMember: the member is the cluster's last.
	CodeLastMember
)

var codeNames = [...]string{
	CodeInvalidName:       "invalid_name",
	CodeReservedName:      "reserved_name",
	CodeQueueExists:       "queue_exists",
	CodeQueueNotFound:     "queue_not_found",
	CodeDeadLetterQueue:   "dead_letter_queue",
	CodeTooManyQueues:     "too_many_queues",
	CodeInvalidDefinition: "invalid_definition",
	CodeInvalidNode:       "invalid_node",
	CodeNodeNotFound:      "node_not_found",
	CodeNodeNotDrained:    "node_not_drained",
	CodeLastMember:        "last_member",
}

func (c Code) String() string {
	if int(c) < len(codeNames) && codeNames[c] != "" {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint8(c))
}

// Refused is the Apply response of a command that the state refused: it changed nothing, and
// every node refused it alike. Message is written for the client (it names the queue); for the
// codes the broker answers today it is the broker's message word for word.
type Refused struct {
	Code    Code
	Message string
}

func (e *Refused) Error() string { return "meta: " + e.Message }

func refuse(c Code, format string, args ...any) *Refused {
	return &Refused{Code: c, Message: fmt.Sprintf(format, args...)}
}
