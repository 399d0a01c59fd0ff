// Package e2e holds the end-to-end tests of the Go SDK (client/fila) and the fila CLI
// (client/cmd/fila) against the real broker.
//
// The client module never imports server packages, so TestMain builds server/cmd/fila-server
// and client/cmd/fila with the go command (from the directory holding go.work) and runs them as
// subprocesses: one shared server on a free loopback port with a temporary data directory, plus
// private servers for the tests that change broker-wide configuration or restart the broker.
// FILA_TEST_ADDR, when set, points the shared-server tests at an external broker instead
// (FILA_TEST_API_KEY is sent if set).
//
//	go test -race ./e2e/
//
// The go command caches test results by what it can see: the test binary and the files of the
// client module. A change to the server does not invalidate a cached pass, so run the suite with
// -count=1 after changing server code.
package e2e
