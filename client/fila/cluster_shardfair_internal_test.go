package fila

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The smooth weighted round robin's lag, against the exact shares of a naive twin (count_i =
// m·w_i/W after m turns): random weights (0 to 39) of 1 to 64 shards, every prefix of 2,000 turns. The
// bound the fairness of a sharded queue rests on (docs/sharding.md): within 1 of the share.
func TestWeightedTurnLagsItsShareByLessThanOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	worst := 0.0
	for range 2000 {
		n := 1 + rng.IntN(64)
		weights := make([]int64, n)
		var total int64
		for i := range weights {
			weights[i] = int64(rng.IntN(40)) // 0: out of the turns
			total += weights[i]
		}
		in := func(i int) bool { return weights[i] > 0 }
		cur, counts := make([]int64, n), make([]int64, n)
		for m := int64(1); m <= 2000; m++ {
			best, sum := weightedTurn(cur, weights, in)
			if total == 0 {
				if best != -1 {
					t.Fatalf("a turn with no weight: %d", best)
				}
				break
			}
			if sum != total || weights[best] == 0 {
				t.Fatalf("weights %v: turn %d to %d (total %d)", weights, m, best, sum)
			}
			counts[best]++
			for i := range n {
				lag := math.Abs(float64(counts[i]) - float64(m*weights[i])/float64(total))
				worst = max(worst, lag)
				if lag >= 1 {
					t.Fatalf("weights %v after %d turns: shard %d has %d, share %.3f", weights, m, i, counts[i], float64(m*weights[i])/float64(total))
				}
			}
		}
	}
	t.Logf("worst lag %.3f", worst)
}
