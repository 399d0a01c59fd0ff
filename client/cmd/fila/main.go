// Command fila administers a Fila broker and enqueues and consumes messages over FIBP.
//
//	fila queue create orders --max-attempts 5 --backoff exponential
//	fila enqueue orders --header tenant=acme 'hello'
//	fila consume orders --ack --count 10
//	fila queue stats orders --json
//
// The broker address comes from --addr or FILA_ADDR (default 127.0.0.1:5555), the API key from
// --api-key or FILA_API_KEY. Errors print one line naming the protocol error code and exit
// non-zero (1; 2 for usage errors).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runWith(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runWith(context.Background(), args, os.Stdin, stdout, stderr)
}

func runWith(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	a.close()
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, errorLine(err, a.timeout))
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// usageError marks a mistake in the command line itself.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// errorLine renders err as the single line the CLI prints: prefixed "fila: ", never a trace.
func errorLine(err error, timeout fmt.Stringer) string {
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		msg = fmt.Sprintf("no answer within %v (see --timeout)", timeout)
	}
	if _, isUsage := errors.AsType[usageError](err); isUsage {
		msg += " (see 'fila --help')"
	}
	msg = strings.ReplaceAll(strings.TrimSpace(msg), "\n", "; ")
	if !strings.HasPrefix(msg, "fila: ") {
		msg = "fila: " + msg
	}
	return msg
}
