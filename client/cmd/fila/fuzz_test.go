package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/fibptest"
)

// FuzzArgs runs arbitrary command lines (arguments separated by newlines) against the fake
// broker. Whatever the arguments, the CLI must not panic or hang, must exit 0, 1 or 2, and a
// failure must print exactly one line, starting "fila: ". The broker address is pinned after
// the fuzzed arguments (the last flag wins) and the Rift one by FILA_RIFT_ADDR; arguments that
// would end flag parsing, set the Rift address or name devices are dropped, so that no input reaches another host or reads forever.
func FuzzArgs(f *testing.F) {
	for _, seed := range []string{
		"queue\nlist", "queue\nstats\norders\n--json", "queue\ncreate\no\n--max-attempts\n5\n--backoff\nexponential",
		"enqueue\norders\n--header\ntenant=acme\nhello", "enqueue\norders\n--header\nnoequals\nx", "consume\norders\n--ack\n--count\n2",
		"queue\ndelete\norders", "queue\nupdate\norders\n--visibility-timeout\n-1s", "ack\norders\nnot-a-uuid",
		"nack\norders\n0190abcd-0000-7000-8000-00000000002a\n--error\nx", "throttle\nlist", "acl\nset\nkey_x\nproduce:*",
		"key\ncreate\nk\n--superadmin", "config\nset\nscheduler.quantum\n2", "redrive\norders.dlq\n--count\n3",
		"rift\npub\na.b\nx", "--bogus", "-x", "help\nqueue", "completion\nbash", "version", "",
	} {
		f.Add(seed)
	}
	f.Setenv("FILA_RIFT_ADDR", "127.0.0.1:1") // rift commands only; a --rift-addr given is dropped
	b := &fakeBroker{}
	p := fibptest.Start(f, fibptest.Options{Handler: b.handle})
	f.Fuzz(func(t *testing.T, line string) {
		var args []string
		for _, a := range strings.Split(line, "\n") {
			if a == "--" || strings.Contains(a, "/dev/") || strings.Contains(a, "/proc/") || strings.HasPrefix(a, "--rift-addr") {
				continue
			}
			args = append(args, a)
		}
		if len(args) > 32 {
			args = args[:32]
		}
		args = append(args, "--addr", p.Addr(), "--timeout", "500ms")
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var out, errOut bytes.Buffer
		start := time.Now()
		code := runWith(ctx, args, strings.NewReader(""), &out, &errOut)
		if time.Since(start) > time.Minute { // a net against a hang, never reached by a CLI that heeds its context, however loaded the machine
			t.Fatalf("%q took %v, past its context", args, time.Since(start))
		}
		switch code {
		case 0:
		case 1, 2:
			msg := errOut.String()
			if !strings.HasPrefix(msg, "fila: ") || !strings.HasSuffix(msg, "\n") || strings.Count(msg, "\n") != 1 {
				t.Fatalf("%q exited %d with stderr %q: want one line starting \"fila: \"", args, code, msg)
			}
		default:
			t.Fatalf("%q exited %d", args, code)
		}
	})
}
