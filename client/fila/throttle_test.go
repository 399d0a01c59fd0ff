package fila

import (
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/google/go-cmp/cmp"
)

func TestThrottleBuilder(t *testing.T) {
	base := NewThrottle("stripe").Limit(100, time.Second)
	keyed := base.Limit(1000, time.Minute).KeyedBy(HeaderPart("merchant")).UnthrottledWhenKeyMissing()
	if len(base.Limits) != 1 || len(base.Key) != 0 || base.WhenKeyMissing != fibp.WhenKeyMissingSharedBucket {
		t.Fatalf("deriving a throttle changed its base: %+v", base)
	}
	want := Throttle{Name: "stripe", Limits: []ThrottleLimit{{100, time.Second}, {1000, time.Minute}},
		Key: Key{HeaderPart("merchant")}, WhenKeyMissing: fibp.WhenKeyMissingUnthrottled}
	if diff := cmp.Diff(want, keyed); diff != "" {
		t.Fatalf("builder (-want +got):\n%s", diff)
	}
	d := keyed.wire()
	if d.Limits[1] != (fibp.ThrottleLimit{MaxDeliveries: 1000, WindowMs: 60000}) || d.WhenKeyMissing != fibp.WhenKeyMissingUnthrottled {
		t.Fatalf("wire form %+v", d)
	}
}

func TestParseThrottleRoundTrips(t *testing.T) {
	for _, s := range []string{
		"stripe=100/1s",
		"stripe=100/1s,1000/1m0s",
		"merchant=5/1s;key=header:merchant;missing=unthrottled",
		"tenant=10/500ms;key=fairness_key,attr:region",
	} {
		th, err := ParseThrottle(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got := FormatThrottle(th); got != s {
			t.Errorf("FormatThrottle(ParseThrottle(%q)) = %q", s, got)
		}
	}
	for _, bad := range []string{"", "stripe", "=5/1s", "s=5", "s=x/1s", "s=5/fast", "s=5/1s;colour=red", "s=5/1s;key=bogus"} {
		if _, err := ParseThrottle(bad); err == nil {
			t.Errorf("ParseThrottle(%q) accepted", bad)
		}
	}
}
