//go:build race

package session

// raceEnabled: sync.Pool drops items at random under the race detector.
const raceEnabled = true
