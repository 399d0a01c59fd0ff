//go:build race

package main

// raceEnabled: this test binary runs under the race detector (make test's second step).
const raceEnabled = true
