//go:build !race

package nodelink_test

const raceEnabled = false
