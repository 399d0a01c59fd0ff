package plugin

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/server/rift/auth"
	"github.com/filamq/fila/server/rift/bus"
	"github.com/filamq/fila/server/rift/service"
)

func newService(t *testing.T) *service.Service {
	svc, err := service.Open(service.Options{Identities: []auth.Config{
		{Name: "echo", Token: "e", Publish: []string{"_INBOX.>", "echo.out"}, Subscribe: []string{"echo.>"}},
		{Name: "client", Token: "c", Publish: []string{"echo.>"}, Subscribe: []string{"echo.out"}},
	}, StreamDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return svc
}

const echo = `
local n = 0
rift.subscribe("echo.req", function(msg)
  n = n + 1
  rift.reply(msg, string.upper(msg.payload) .. " #" .. n .. " by " .. rift.identity)
end)
rift.subscribe("echo.fire", "workers", function(msg)
  rift.publish("echo.out", msg.payload)
end)
`

func TestLoadedPluginRepliesAndPublishes(t *testing.T) {
	svc := newService(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "echo.lua"), []byte(echo), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ignored"), 0o644)
	h, err := Load(svc, Options{Dir: dir, Identities: map[string]string{"echo": "echo"}, Logger: slog.Default()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if len(h.Plugins()) != 1 {
		t.Fatalf("%d plugins", len(h.Plugins()))
	}
	clientID, _ := svc.Auth.Lookup("client")
	client := svc.Session(clientID)
	ctx := context.Background()
	m, err := client.Request(ctx, "echo.req", []byte("hi"), 10*time.Second)
	if err != nil || string(m.Payload) != "HI #1 by echo" {
		t.Fatalf("request: %q %v", m.Payload, err)
	}
	out, err := client.Subscribe("echo.out", "", busDefaults)
	if err != nil {
		t.Fatal(err)
	}
	client.Publish("echo.fire", "", []byte("fired"))
	if m, err := out.Next(ctx); err != nil || string(m.Payload) != "fired" {
		t.Fatalf("publish from a callback: %q %v", m.Payload, err)
	}
}

func TestSandbox(t *testing.T) {
	svc := newService(t)
	id, _ := svc.Auth.Lookup("echo")
	sess := svc.Session(id)
	for _, src := range []string{
		`io.write("x")`, `os.exit(1)`, `require("os")`, `load("return 1")()`, `loadstring("return 1")()`,
		`dofile("/etc/passwd")`, `loadfile("/etc/passwd")`, `debug.getinfo(1)`, `package.loaded.os.exit()`,
		`string.dump(function() end)`, `setfenv(1, {})`, `collectgarbage()`, `print("x")`,
	} {
		if _, err := Start("t", src, sess, time.Second, slog.Default()); err == nil {
			t.Errorf("%s ran in the sandbox", src)
		}
	}
	// The allowed libraries work.
	p, err := Start("ok", `local t = {3,1,2}; table.sort(t); assert(t[1] == 1 and math.max(1, 2) == 2 and string.rep("a", 2) == "aa")`,
		sess, time.Second, slog.Default())
	if err != nil {
		t.Fatalf("string/table/math: %v", err)
	}
	p.Close()
}

func TestTimeBudgetAndPermissions(t *testing.T) {
	svc := newService(t)
	id, _ := svc.Auth.Lookup("echo")
	sess := svc.Session(id)
	if _, err := Start("loop", `while true do end`, sess, 20*time.Millisecond, slog.Default()); err == nil {
		t.Fatal("an endless loop was not interrupted")
	}
	for _, src := range []string{`rift.publish("elsewhere", "x")`, `rift.subscribe(">", function() end)`,
		`rift.publish("rift.events.x", "x")`, `rift.publish("echo.out", "x", "_INBOX.not.mine")`} {
		if _, err := Start("perm", src, sess, time.Second, slog.Default()); err == nil || !strings.Contains(err.Error(), "permission") {
			t.Errorf("%s: %v, want a permission error", src, err)
		}
	}
	// An endless callback is interrupted and the plugin keeps serving.
	p, err := Start("cb", `rift.subscribe("echo.spin", function(m) if m.payload == "spin" then while true do end end; rift.reply(m, "ok") end)`,
		sess, 20*time.Millisecond, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	clientID, _ := svc.Auth.Lookup("client")
	client := svc.Session(clientID)
	client.Publish("echo.spin", "", []byte("spin"))
	if m, err := client.Request(context.Background(), "echo.spin", nil, 10*time.Second); err != nil || string(m.Payload) != "ok" {
		t.Fatalf("after an interrupted callback: %q %v", m.Payload, err)
	}
}

func TestUnknownIdentityFailsTheStart(t *testing.T) {
	svc := newService(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x.lua"), []byte(""), 0o644)
	if _, err := Load(svc, Options{Dir: dir, DefaultIdentity: "nobody"}); err == nil {
		t.Fatal("a plugin without a configured identity loaded")
	}
}

var busDefaults = bus.SubOptions{}
