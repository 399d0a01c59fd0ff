//go:build race

package transport

// underRace is whether the tests run under the race detector.
const underRace = true
