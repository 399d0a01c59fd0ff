package listener_test

import (
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/server/internal/rifttest"
	"github.com/filamq/fila/server/rift/auth"
	"github.com/filamq/fila/server/rift/events"
	"github.com/filamq/fila/server/rift/listener"
	"github.com/filamq/fila/server/rift/service"
	"github.com/filamq/fila/server/rift/stream"
)

// The identities every test server knows.
var identities = []auth.Config{
	{Name: "admin", Token: "admin-token", Publish: []string{">"}, Subscribe: []string{">"}, Control: true},
	{Name: "noctl", Token: "noctl-token", Publish: []string{">"}, Subscribe: []string{">"}},
	{Name: "game", Token: "game-token", Publish: []string{"game.>", "svc.>"}, Subscribe: []string{"game.*", "_INBOX.game.>"}},
	{Name: "wide", Token: "wide-token", Publish: []string{"game.>"}, Subscribe: []string{"game.>"}},
	{Name: "svc", Token: "svc-token", Publish: []string{"_INBOX.>"}, Subscribe: []string{"svc.>"}},
	{Name: "reader", Token: "reader-token", Publish: []string{"events.>", "small.>", "big.>", "aged.>"}, Subscribe: []string{"events.>", "small.>", "big.>", "aged.>"}},
	{Name: "other", Token: "other-token", Publish: []string{"events.>"}, Subscribe: []string{"events.>"}},
	{Name: "narrow", Token: "narrow-token", Publish: []string{"events.a"}, Subscribe: []string{"events.a"}},
}

var streams = []stream.Config{
	{Name: "events", Subjects: []string{"events.>"}, Durability: stream.Fsync},
	{Name: "small", Subjects: []string{"small.>"}, Durability: stream.OS, MaxMsgs: 3},
	{Name: "big", Subjects: []string{"big.>"}, Durability: stream.Memory, MaxBytes: 100, MaxPayload: 64},
	{Name: "aged", Subjects: []string{"aged.>"}, Durability: stream.Fsync, MaxAge: time.Minute},
}

// clock is a settable clock for ack waits and max_age.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	t     testing.TB
	dir   string
	clock *clock
	opts  listener.Options
	svc   *service.Service
	srv   *listener.Server
	addr  string
}

// start runs a service and listener on a loopback port with data in a temporary directory.
func start(t *testing.T, tune func(*listener.Options)) *fixture {
	f := &fixture{t: t, dir: t.TempDir(), clock: &clock{t: time.UnixMilli(1_700_000_000_000)}}
	f.opts = listener.Options{Addr: "127.0.0.1:0", TLS: rifttest.ServerTLS(t)}
	if tune != nil {
		tune(&f.opts)
	}
	f.open()
	t.Cleanup(f.stop)
	return f
}

func (f *fixture) open() {
	svc, err := service.Open(service.Options{Identities: identities, Streams: streams, StreamDir: f.dir, Clock: f.clock.Now})
	if err != nil {
		f.t.Fatal(err)
	}
	f.svc = svc
	o := f.opts
	o.Events = events.New(svc.Bus)
	if f.srv, err = listener.Listen(svc, o); err != nil {
		svc.Close()
		f.t.Fatal(err)
	}
	f.addr = f.srv.Addr().String()
}

func (f *fixture) stop() {
	if f.srv != nil {
		f.srv.Close()
		f.svc.Close()
		f.srv, f.svc = nil, nil
	}
}

// restart stops the server and opens it again on the same data.
func (f *fixture) restart() {
	f.stop()
	f.open()
}
