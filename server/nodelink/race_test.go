//go:build race

package nodelink_test

// raceEnabled: this test binary runs under the race detector (make test's second step).
const raceEnabled = true
