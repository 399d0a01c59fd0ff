//go:build race

package fila_test

const raceEnabled = true
