//go:build !race

package fila_test

const raceEnabled = false
