package engine

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultConfig(t *testing.T) {
	want := Config{VisibilityTimeoutMs: 30000, MaxAttempts: 10, Backoff: BackoffExponential,
		BackoffInitialMs: 1000, BackoffMaxMs: 300000, Quantum: 1}
	if got := DefaultConfig(); got != want {
		t.Fatalf("DefaultConfig() = %+v", got)
	}
	must(t, want.Validate())
	if got := (Config{}).WithDefaults(); got != want {
		t.Fatalf("zero WithDefaults() = %+v", got)
	}
	custom := Config{VisibilityTimeoutMs: 1, MaxAttempts: 2, Backoff: BackoffNone, BackoffInitialMs: 3, BackoffMaxMs: 4, Quantum: 5}
	if got := custom.WithDefaults(); got != custom {
		t.Fatalf("WithDefaults changed set fields: %+v", got)
	}
}

func TestValidateReportsEverything(t *testing.T) {
	err := Config{Backoff: BackoffExponential, BackoffMaxMs: 0}.Validate()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate = %v", err)
	}
	for _, want := range []string{"visibility", "max attempts", "quantum", "initial delay"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error %q does not mention %q", err, want)
		}
	}
	for _, c := range []Config{
		{VisibilityTimeoutMs: 1, MaxAttempts: 1, Quantum: 1, Backoff: BackoffDefault},
		{VisibilityTimeoutMs: 1, MaxAttempts: 1, Quantum: 1, Backoff: 9},
		{VisibilityTimeoutMs: 1, MaxAttempts: 1, Quantum: 1, Backoff: BackoffExponential, BackoffInitialMs: 5, BackoffMaxMs: 4},
		{VisibilityTimeoutMs: math.MaxUint64, MaxAttempts: 1, Quantum: 1, Backoff: BackoffNone},
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v", c, err)
		}
	}
	must(t, Config{VisibilityTimeoutMs: 1, MaxAttempts: 1, Quantum: 1, Backoff: BackoffNone}.Validate())
	must(t, Config{VisibilityTimeoutMs: 1, MaxAttempts: 1, Quantum: 1, Backoff: BackoffFixed, BackoffInitialMs: 1}.Validate())
}

func TestBackoffText(t *testing.T) {
	for b := BackoffDefault; b <= BackoffExponential; b++ {
		text, err := b.MarshalText()
		must(t, err)
		var got Backoff
		must(t, got.UnmarshalText(text))
		if got != b || b.String() != string(text) {
			t.Errorf("%d round-trips to %d via %q", b, got, text)
		}
	}
	if Backoff(7).String() != "Backoff(7)" {
		t.Error("unknown Backoff String")
	}
	if _, err := Backoff(7).MarshalText(); err == nil {
		t.Error("unknown Backoff marshalled")
	}
	var b Backoff
	if err := b.UnmarshalText([]byte("linear")); err == nil {
		t.Error("unknown name unmarshalled")
	}
}

func TestRetryDelay(t *testing.T) {
	exp := Config{Backoff: BackoffExponential, BackoffInitialMs: 1000, BackoffMaxMs: 300000}
	for _, tc := range []struct {
		cfg      Config
		attempts uint32
		want     uint64
	}{
		{Config{Backoff: BackoffNone, BackoffInitialMs: 5}, 3, 0},
		{Config{Backoff: BackoffFixed, BackoffInitialMs: 5}, 3, 5},
		{exp, 0, 1000},
		{exp, 1, 1000},
		{exp, 2, 2000},
		{exp, 9, 256000},
		{exp, 10, 300000},
		{exp, 64, 300000},
		{exp, 65, 300000},
		{exp, math.MaxUint32, 300000},
		{Config{Backoff: BackoffExponential, BackoffInitialMs: 1, BackoffMaxMs: math.MaxUint64}, 64, 1 << 63},
		{Config{Backoff: BackoffExponential, BackoffInitialMs: 3, BackoffMaxMs: math.MaxUint64}, 64, math.MaxUint64},
	} {
		if got := tc.cfg.RetryDelay(tc.attempts); got != tc.want {
			t.Errorf("%v initial %d max %d, attempts %d: %d, want %d",
				tc.cfg.Backoff, tc.cfg.BackoffInitialMs, tc.cfg.BackoffMaxMs, tc.attempts, got, tc.want)
		}
	}
}

func TestExtendDeadline(t *testing.T) {
	if got := ExtendDeadline(100, 50); got != 150 {
		t.Errorf("ExtendDeadline(100, 50) = %d", got)
	}
	if got := ExtendDeadline(100, math.MaxUint64); got != 100+MaxLeaseExtensionMs {
		t.Errorf("uncapped: %d", got)
	}
	if got := addMs(math.MaxInt64-1, 5); got != math.MaxInt64 {
		t.Errorf("addMs does not saturate: %d", got)
	}
}

// leasedQueue returns a queue (max attempts 3, exponential 100 ms .. 1 s) with message 1
// delivered `deliveries` times and currently leased.
func leasedQueue(t *testing.T, deliveries int) *Queue {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MaxAttempts, cfg.BackoffInitialMs, cfg.BackoffMaxMs = 3, 100, 1000
	q := newTestQueue(t, cfg)
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, Message{ID: mid(1)})
	for i := range deliveries {
		if i > 0 {
			_, err := q.ApplyFail(Fail{ID: mid(1), At: 0, Attempts: uint32(i)})
			must(t, err)
		}
		if len(q.Dispatch(0, 1, nil)) != 1 {
			t.Fatal("no delivery")
		}
	}
	return q
}

func TestDecideFailureRetryPolicy(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	for _, tc := range []struct {
		name       string
		deliveries int
		retryAfter *uint64
		want       Fail
	}{
		{"first failure backs off initial", 1, nil, Fail{ID: mid(1), At: 1000, Error: "e", NotBefore: 1100}},
		{"second failure doubles", 2, nil, Fail{ID: mid(1), At: 1000, Error: "e", NotBefore: 1200}},
		{"retry_after wins", 2, u(7), Fail{ID: mid(1), At: 1000, Error: "e", NotBefore: 1007}},
		{"retry_after 0 is immediate", 1, u(0), Fail{ID: mid(1), At: 1000, Error: "e", NotBefore: 1000}},
		{"max attempts dead-letters", 3, u(7), Fail{ID: mid(1), At: 1000, Error: "e", DeadLetter: true, Reason: ReasonMaxAttempts}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := leasedQueue(t, tc.deliveries)
			got, err := q.DecideFailure(mid(1), 1000, "e", tc.retryAfter)
			must(t, err)
			tc.want.Attempts = uint32(tc.deliveries) // the lease counted the failed delivery
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("DecideFailure (-want +got):\n%s", diff)
			}
			if m, _ := q.Get(mid(1)); m.State != StateLeased {
				t.Fatal("DecideFailure changed the queue")
			}
		})
	}
}

func TestDecideFailurePolicyHook(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	for _, tc := range []struct {
		name       string
		decision   FailureDecision
		ok         bool
		deliveries int
		retryAfter *uint64
		want       Fail
	}{
		{"hook dead-letters early", FailureDecision{DeadLetter: true}, true, 1, nil,
			Fail{ID: mid(1), At: 1000, Error: "e", DeadLetter: true, Reason: ReasonScript}},
		{"hook retries past max", FailureDecision{}, true, 3, nil,
			Fail{ID: mid(1), At: 1000, Error: "e", NotBefore: 1400}},
		{"hook delay", FailureDecision{HasDelay: true, DelayMs: 50}, true, 1, nil,
			Fail{ID: mid(1), At: 1000, Error: "e", NotBefore: 1050}},
		{"retry_after beats hook delay", FailureDecision{HasDelay: true, DelayMs: 50}, true, 1, u(5),
			Fail{ID: mid(1), At: 1000, Error: "e", NotBefore: 1005}},
		{"no answer falls back", FailureDecision{DeadLetter: true}, false, 1, nil,
			Fail{ID: mid(1), At: 1000, Error: "e", NotBefore: 1100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := leasedQueue(t, tc.deliveries)
			var seen Message
			q.SetFailurePolicy(FailurePolicyFunc(func(m *Message, errText string) (FailureDecision, bool) {
				seen = *m
				return tc.decision, tc.ok
			}))
			got, err := q.DecideFailure(mid(1), 1000, "e", tc.retryAfter)
			must(t, err)
			tc.want.Attempts = uint32(tc.deliveries) // the lease counted the failed delivery
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("DecideFailure (-want +got):\n%s", diff)
			}
			if seen.ID != mid(1) || seen.Attempts != uint32(tc.deliveries) || seen.State != StateLeased {
				t.Fatalf("hook saw %+v", seen)
			}
		})
	}
}

func TestDecideFailureNotLeased(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	enqueue(t, q, 0, Message{ID: mid(1)})
	for _, id := range []MsgID{mid(1), mid(2)} {
		if _, err := q.DecideFailure(id, 0, "e", nil); !errors.Is(err, ErrMessageNotFound) {
			t.Errorf("DecideFailure(%v) = %v", id, err)
		}
		if err := q.CheckLease(id, 0); !errors.Is(err, ErrMessageNotFound) {
			t.Errorf("CheckLease(%v) = %v", id, err)
		}
	}
}

// The whole dead-letter and redrive path across a parent queue and its DLQ.
func TestDeadLetterAndRedrive(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxAttempts = 1
	parent := newTestQueue(t, cfg)
	dlq, err := NewQueue("q.dlq", DefaultConfig())
	must(t, err)
	must(t, parent.Subscribe("c", 0))
	enqueue(t, parent, 100, Message{ID: mid(1), FairnessKey: "k", Weight: 2, NotBefore: 150, Payload: []byte("p")},
		Message{ID: mid(2), FairnessKey: "k", Weight: 2})
	parent.Dispatch(200, 2, nil)
	for _, n := range []uint64{2, 1} {
		f, err := parent.DecideFailure(mid(n), 300, "lease expired", nil)
		must(t, err)
		if !f.DeadLetter {
			t.Fatalf("not dead-lettered: %+v", f)
		}
		m, err := parent.ApplyFail(f)
		must(t, err)
		enqueue(t, dlq, 300, DeadLetterCopy(m))
	}
	in, _ := dlq.Get(mid(1))
	want := Message{ID: mid(1), Queue: "q.dlq", Payload: []byte("p"), FairnessKey: "k", Weight: 2,
		EnqueuedAt: 100, NotBefore: 150, Attempts: 1, LastError: "lease expired", State: StateReady}
	if diff := cmp.Diff(want, in); diff != "" {
		t.Fatalf("DLQ message (-want +got):\n%s", diff)
	}
	// Redrive one: oldest in the DLQ first (2 was dead-lettered first).
	batch := dlq.Oldest(1, nil)
	if len(batch) != 1 || batch[0].ID != mid(2) {
		t.Fatalf("Oldest(1) = %v", batch)
	}
	removed, err := dlq.ApplyRemove(Remove{ID: mid(2), At: 400})
	must(t, err)
	enqueue(t, parent, 400, RedriveCopy(removed))
	back, _ := parent.Get(mid(2))
	if back.Attempts != 0 || back.RedriveCount != 1 || back.LastError != "lease expired" || back.State != StateReady {
		t.Fatalf("redriven message = %+v", back)
	}
	if got := parent.Dispatch(400, 1, nil); len(got) != 1 {
		t.Fatal("redriven message not delivered")
	}
	if back, _ = parent.Get(mid(2)); back.Attempts != 1 {
		t.Fatalf("attempt after redrive = %d, want 1", back.Attempts)
	}
	if dlq.Len() != 1 || parent.Len() != 1 {
		t.Fatalf("dlq %d, parent %d", dlq.Len(), parent.Len())
	}
}

func TestCopyHelpers(t *testing.T) {
	m := Message{ID: mid(1), Queue: "q", FairnessKey: "k", Weight: 3, EnqueuedAt: 1, NotBefore: 2, Attempts: 4,
		RedriveCount: 5, LastError: "x", State: StateLeased, LeasedAt: 6, LeaseExpiresAt: 7, Consumer: "c"}
	dl := DeadLetterCopy(m)
	want := Message{ID: mid(1), FairnessKey: "k", Weight: 3, EnqueuedAt: 1, NotBefore: 2, Attempts: 4,
		RedriveCount: 5, LastError: "x"}
	if diff := cmp.Diff(want, dl); diff != "" {
		t.Fatalf("DeadLetterCopy (-want +got):\n%s", diff)
	}
	want.Attempts, want.RedriveCount = 0, 6
	if diff := cmp.Diff(want, RedriveCopy(m)); diff != "" {
		t.Fatalf("RedriveCopy (-want +got):\n%s", diff)
	}
	m.RedriveCount = math.MaxUint32
	if RedriveCopy(m).RedriveCount != math.MaxUint32 {
		t.Fatal("RedriveCount overflowed")
	}
}
