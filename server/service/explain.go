package service

// The admin API's inspection answers (docs/admin-api.md): why a message or a fairness key is not
// delivered now, the fairness-key table and the queue list. They are plain data with the JSON
// names of the API (snake_case; a figure that does not apply to a reason is left out).

// Explanation is a stored message's state and every reason it is not delivered now.
type Explanation struct {
	ID    string `json:"id"` // the message ID in its UUID form
	Queue string `json:"queue"`
	// State is ready, delayed, leased, held (the reclaim grace of fast delivery durability),
	// waiting (behind its ordering group's head), throttled, parked (on_enqueue failed) or
	// dead_lettered (in the queue's dead-letter queue).
	State string `json:"state"`
	// DeliverableNow: the queue's next dispatch delivers this message first. Reasons is then
	// empty.
	DeliverableNow bool   `json:"deliverable_now"`
	FairnessKey    string `json:"fairness_key"`
	Group          string `json:"group,omitempty"`
	Grouped        bool   `json:"grouped,omitempty"`
	Attempts       uint32 `json:"attempts"`
	MaxAttempts    uint32 `json:"max_attempts"`
	EnqueuedAt     int64  `json:"enqueued_at"` // Unix ms
	NotBefore      int64  `json:"not_before,omitempty"`
	LastError      string `json:"last_error,omitempty"`
	// Reasons, most immediate first.
	Reasons []Reason `json:"reasons"`
}

// Reason is one reason a message, or a fairness key's backlog, is not delivered now, with the
// figures behind it. Reason names it; Text says it in a sentence with its figures; the other
// fields are the figures, set as the reason calls for:
//
//	delayed        until
//	leased         consumer, leased_at, until, attempt, max_attempts
//	ordering       group, head, head_state, ahead
//	throttled      throttle, bucket, bucket_values, bucket_missing, next_room_at (class: the
//	               engine's class of the parked message, until: when it is asked about again)
//	fairness       keys_ahead, deliveries_ahead, deficit, weight, quantum
//	key_backlog    ahead (messages of its own fairness key before it)
//	parked         error, tries
//	reclaim_hold   until
//	no_subscriber  —
//	no_credit      —
//	dead_lettered  error, dead_letter_reason
//	no_backlog     — (a fairness key without stored messages)
//
// For a fairness key, count is how many of its messages the reason holds. at_least: a count
// stopped at a bound and is at least the figure.
type Reason struct {
	Reason string `json:"reason"`
	Text   string `json:"text"`

	Until           int64    `json:"until,omitempty"` // Unix ms
	Consumer        string   `json:"consumer,omitempty"`
	LeasedAt        int64    `json:"leased_at,omitempty"`
	Attempt         uint32   `json:"attempt,omitempty"`
	MaxAttempts     uint32   `json:"max_attempts,omitempty"`
	Group           string   `json:"group,omitempty"`
	Head            string   `json:"head,omitempty"` // message ID
	HeadState       string   `json:"head_state,omitempty"`
	Throttle        string   `json:"throttle,omitempty"`
	Bucket          string   `json:"bucket,omitempty"` // the bucket's key values, joined by ", "; "(missing)" for the shared bucket of messages missing the key
	BucketValues    []string `json:"bucket_values,omitempty"`
	BucketMissing   bool     `json:"bucket_missing,omitempty"`
	NextRoomAt      int64    `json:"next_room_at,omitempty"` // Unix ms; 0: there is room now
	KeysAhead       int      `json:"keys_ahead,omitempty"`
	DeliveriesAhead uint64   `json:"deliveries_ahead,omitempty"`
	Deficit         uint64   `json:"deficit,omitempty"`
	Weight          uint32   `json:"weight,omitempty"`
	Quantum         uint32   `json:"quantum,omitempty"`
	Ahead           int      `json:"ahead,omitempty"`
	Count           int      `json:"count,omitempty"`
	AtLeast         bool     `json:"at_least,omitempty"`
	Error           string   `json:"error,omitempty"`
	Tries           uint32   `json:"tries,omitempty"`
	DeadLetter      string   `json:"dead_letter_reason,omitempty"`
}

// KeyExplanation is a fairness key's state and every reason its backlog is not delivered now.
type KeyExplanation struct {
	Key   string `json:"key"`
	Queue string `json:"queue"`
	// Backlog counts its stored messages not in flight; Ready those deliverable in DRR order;
	// Held those held by the reclaim grace; InFlight its leased ones.
	Backlog  uint64 `json:"backlog"`
	Ready    uint64 `json:"ready"`
	Held     uint64 `json:"held"`
	InFlight uint64 `json:"in_flight"`
	// Weight is the weight of its most recently enqueued message; Deficit its remaining DRR
	// deficit (0 unless it holds the turn); at its turn it receives Weight × Quantum.
	Weight  uint32 `json:"weight"`
	Deficit uint64 `json:"deficit"`
	Quantum uint32 `json:"quantum"`
	// Its place in the DRR round of RoundKeys keys: InRound when it has ready messages, HasTurn
	// when it holds the turn, else KeysAhead keys come first with DeliveriesAhead deliveries.
	InRound         bool   `json:"in_round"`
	HasTurn         bool   `json:"has_turn"`
	RoundKeys       int    `json:"round_keys"`
	KeysAhead       int    `json:"keys_ahead"`
	DeliveriesAhead uint64 `json:"deliveries_ahead"`
	// Deliveries in the last minute, the key's and the queue's, and the share of the queue's
	// deliveries its weight entitles it to among the keys with a backlog.
	DeliveriesLastMinute      uint64  `json:"deliveries_last_minute"`
	QueueDeliveriesLastMinute uint64  `json:"queue_deliveries_last_minute"`
	WeightedShare             float64 `json:"weighted_share"`
	// Asleep: the queue is hibernating, and the figures are its summary's (see FairnessKeys).
	Asleep  bool     `json:"asleep,omitempty"`
	Reasons []Reason `json:"reasons"`
}

// KeyListOptions selects a page of a queue's fairness keys.
type KeyListOptions struct {
	Search string // keys containing it
	Sort   string // backlog (the default), deliveries or name
	After  string // the Next of the previous page
	Limit  int    // 0: DefaultKeyPage; at most MaxKeyPage
}

// Key pages.
const (
	DefaultKeyPage = 100
	MaxKeyPage     = 1000
)

// KeyRow is one fairness key of a queue's key table.
type KeyRow struct {
	Key                  string  `json:"key"`
	Backlog              uint64  `json:"backlog"`
	Ready                uint64  `json:"ready"`
	InFlight             uint64  `json:"in_flight"`
	Weight               uint32  `json:"weight"`
	Deficit              uint64  `json:"deficit"`
	DeliveriesLastMinute uint64  `json:"deliveries_last_minute"`
	WeightedShare        float64 `json:"weighted_share"`
}

// KeyPage is a page of a queue's fairness keys.
type KeyPage struct {
	Keys []KeyRow `json:"keys"`
	// Next is the After of the next page; "" when this page is the last.
	Next  string `json:"next"`
	Total int    `json:"total"` // keys matching the search
	// DeliveriesLastMinute counts the queue's deliveries in the last minute.
	DeliveriesLastMinute uint64 `json:"deliveries_last_minute"`
	// Asleep: the queue is hibernating; its keys are those of its summary (at most 1,024),
	// Backlog and Ready count their ready messages, and nothing was delivered in the last
	// minute that the summary knows of.
	Asleep bool `json:"asleep,omitempty"`
}

// QueueListOptions selects a page of the queue list.
type QueueListOptions struct {
	Search string // names containing it
	Sort   string // name (the default), depth or oldest
	After  string // the Next of the previous page
	Limit  int    // 0: DefaultQueuePage; at most MaxQueuePage
	// Visible, when set, keeps only the queues it reports true for (the caller's ACL): Total
	// counts those.
	Visible func(queue string) bool
	// Remote, on a node of a cluster, reads the rows of the queue groups this node cannot read
	// (it follows them, or holds no replica) from the nodes that lead them; nil: such queues are
	// left out.
	Remote RowFetcher
}

// RowFetcher returns the rows of groups as node holds them (those it can read), by group name.
type RowFetcher func(node uint64, groups []string) map[string]QueueRow

// Queue pages.
const (
	DefaultQueuePage = 100
	MaxQueuePage     = 500
)

// QueueRow is one queue of the queue list, with its dead-letter queue's depth (dead-letter
// queues are not listed on their own).
type QueueRow struct {
	Name      string `json:"name"`
	Depth     uint64 `json:"depth"` // stored messages not in flight
	Ready     uint64 `json:"ready"` // of which deliverable in DRR order
	InFlight  uint64 `json:"in_flight"`
	Delayed   uint64 `json:"delayed"`
	Held      uint64 `json:"held"`
	Throttled uint64 `json:"throttled"`
	Parked    uint64 `json:"parked"` // unclassified: on_enqueue failed
	DLQDepth  uint64 `json:"dlq_depth"`
	// OldestAgeMs is the age of the oldest message at the head of a fairness key (0 when none).
	OldestAgeMs int64 `json:"oldest_age_ms"`
	// Rates over the last minute (or since the queue list was first read, if less), from the
	// queue's enqueued and acked counters.
	EnqueuedPerS float64 `json:"enqueued_per_s"`
	AckedPerS    float64 `json:"acked_per_s"`
	FairnessKeys uint64  `json:"fairness_keys"` // with ready messages
	Consumers    uint32  `json:"consumers"`
	Asleep       bool    `json:"asleep,omitempty"` // hibernating: the counters are its summary's
}

// QueuePage is a page of the queue list.
type QueuePage struct {
	Queues []QueueRow `json:"queues"`
	Next   string     `json:"next"` // "" when this page is the last
	Total  int        `json:"total"`
}
