package throttle

import (
	"strconv"
	"testing"

	"github.com/filamq/fila/server/keys"
)

// BenchmarkTake is the cost of one admitted delivery in the registry: an unkeyed throttle, and a
// keyed one spread over 10,000 buckets; limits that never bind.
func BenchmarkTake(b *testing.B) {
	never := Limit{Max: 1 << 40, WindowMs: 1000}
	for _, buckets := range []int{1, 10_000} {
		b.Run(strconv.Itoa(buckets)+"buckets", func(b *testing.B) {
			r := NewRegistry(0)
			d := Declaration{Name: "t", Limits: []Limit{never}}
			if buckets > 1 {
				d.Key = keys.Key{{Kind: keys.Header, Name: "k"}}
			}
			s, _ := r.Declare("q", []Declaration{d})
			refs := make([][]Ref, buckets)
			for i := range refs {
				refs[i] = []Ref{{T: s.Throttles()[0], B: BucketKey{Group: keys.JoinGroup([]string{strconv.Itoa(i)})}}}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if ok, _ := r.Take(int64(i/1000), refs[i%buckets]); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}
