// Package plugin runs Rift's Lua plugins (gopher-lua) inside the server.
//
// Every *.lua file of the configured folder is loaded at start, in name order, each into its own
// Lua state of the server's sandbox (server/sandbox: the base functions that stay inside it, the
// string, table and math libraries, read-only, and here the rift module) with the permissions of
// one configured identity. Unlike a queue hook, a plugin keeps its globals between callbacks.
// Every run of plugin code (the script's top level and each callback) has a time budget, after
// which it is interrupted with an error.
//
// The rift module:
//
//	rift.identity                       -- the plugin's identity name
//	rift.subscribe(pattern, [queue,] fn) -- fn(msg) for each message; msg.subject, msg.reply, msg.payload
//	rift.publish(subject, payload [, reply])
//	rift.reply(msg, payload)             -- publish payload to msg.reply
//	rift.log(...)                        -- log at info level
//
// Publications and subscriptions are checked against the identity's permissions like a remote
// client's; a refused call raises a Lua error. A plugin's callbacks run one at a time.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/filamq/fila/lua/sandbox"
	"github.com/filamq/fila/server/rift/bus"
	"github.com/filamq/fila/server/rift/service"
)

// Options configures a Host.
type Options struct {
	Dir             string            // folder of *.lua files
	Identities      map[string]string // plugin name (file name without .lua) → identity name
	DefaultIdentity string            // identity of plugins not in Identities
	TimeBudget      time.Duration     // per run of plugin code (100 ms)
	Logger          *slog.Logger
}

// Host holds the loaded plugins.
type Host struct {
	plugins []*Plugin
}

// Plugin is one loaded script.
type Plugin struct {
	Name   string
	sess   *service.Session
	budget time.Duration
	log    *slog.Logger

	mu     sync.Mutex // serializes every use of sb and L
	sb     *sandbox.State
	L      *lua.LState // sb.L
	subs   []*bus.Subscription
	wg     sync.WaitGroup
	closed bool
}

// Load loads every plugin of o.Dir. A plugin that fails to load fails the whole start.
func Load(svc *service.Service, o Options) (*Host, error) {
	if o.TimeBudget <= 0 {
		o.TimeBudget = 100 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	files, err := filepath.Glob(filepath.Join(o.Dir, "*.lua"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	h := &Host{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".lua")
		idName := o.Identities[name]
		if idName == "" {
			idName = o.DefaultIdentity
		}
		id, ok := svc.Auth.Lookup(idName)
		if !ok {
			h.Close()
			return nil, fmt.Errorf("rift plugin %s: identity %q is not configured (set rift.plugins or rift.plugin_identity)", name, idName)
		}
		src, err := os.ReadFile(f)
		if err != nil {
			h.Close()
			return nil, err
		}
		p, err := Start(name, string(src), svc.Session(id), o.TimeBudget, o.Logger)
		if err != nil {
			h.Close()
			return nil, err
		}
		h.plugins = append(h.plugins, p)
	}
	return h, nil
}

// Plugins returns the loaded plugins.
func (h *Host) Plugins() []*Plugin { return h.plugins }

// Close stops every plugin.
func (h *Host) Close() {
	for _, p := range h.plugins {
		p.Close()
	}
}

// Start runs a plugin's source with sess's permissions.
func Start(name, src string, sess *service.Session, budget time.Duration, log *slog.Logger) (*Plugin, error) {
	p := &Plugin{Name: name, sess: sess, budget: budget, log: log.With("plugin", name)}
	lim := sandbox.DefaultLimits()
	lim.Timeout = budget
	p.sb = sandbox.NewState(lim, map[string]func(*lua.LState) *lua.LTable{"rift": p.module})
	p.L = p.sb.L
	p.mu.Lock()
	defer p.mu.Unlock()
	proto, err := sandbox.Compile(name, src)
	if err == nil {
		_, err = p.sb.Run(p.budget, p.L.NewFunctionFromProto(proto), 0)
	}
	if err != nil {
		p.closeLocked()
		return nil, fmt.Errorf("rift plugin %s: %w", name, err)
	}
	return p, nil
}

// Close ends the plugin's subscriptions and closes its Lua state.
func (p *Plugin) Close() {
	p.mu.Lock()
	subs := p.subs
	p.closed = true
	p.mu.Unlock()
	for _, s := range subs {
		s.Unsubscribe()
	}
	p.wg.Wait()
	p.mu.Lock()
	p.closeLocked()
	p.mu.Unlock()
}

func (p *Plugin) closeLocked() {
	if p.sb != nil {
		p.sb.Close()
		p.sb, p.L = nil, nil
	}
}

func (p *Plugin) module(L *lua.LState) *lua.LTable {
	m := L.NewTable()
	m.RawSetString("identity", lua.LString(p.sess.ID.Name))
	L.SetFuncs(m, map[string]lua.LGFunction{
		"subscribe": p.luaSubscribe,
		"publish":   p.luaPublish,
		"reply":     p.luaReply,
		"log":       p.luaLog,
	})
	return m
}

func (p *Plugin) luaPublish(L *lua.LState) int {
	subj, payload, reply := L.CheckString(1), L.CheckString(2), L.OptString(3, "")
	if _, err := p.sess.Publish(subj, reply, []byte(payload)); err != nil {
		L.RaiseError("rift.publish: %v", err)
	}
	return 0
}

func (p *Plugin) luaReply(L *lua.LState) int {
	msg, payload := L.CheckTable(1), L.CheckString(2)
	reply := lua.LVAsString(msg.RawGetString("reply"))
	if reply == "" {
		L.RaiseError("rift.reply: the message has no reply subject")
	}
	if _, err := p.sess.Publish(reply, "", []byte(payload)); err != nil {
		L.RaiseError("rift.reply: %v", err)
	}
	return 0
}

func (p *Plugin) luaLog(L *lua.LState) int {
	parts := make([]string, L.GetTop())
	for i := range parts {
		parts[i] = L.ToStringMeta(L.Get(i + 1)).String()
	}
	p.log.Info(strings.Join(parts, " "))
	return 0
}

// luaSubscribe registers fn for messages on pattern; called with p.mu held (from plugin code).
func (p *Plugin) luaSubscribe(L *lua.LState) int {
	pattern, queue := L.CheckString(1), ""
	fnArg := 2
	if L.GetTop() >= 3 {
		queue, fnArg = L.CheckString(2), 3
	}
	fn := L.CheckFunction(fnArg)
	if p.closed {
		L.RaiseError("rift.subscribe: plugin closed")
	}
	sub, err := p.sess.Subscribe(pattern, queue, bus.SubOptions{})
	if err != nil {
		L.RaiseError("rift.subscribe: %v", err)
	}
	p.subs = append(p.subs, sub)
	p.wg.Add(1)
	go p.dispatch(sub, fn)
	return 0
}

// dispatch calls fn for each message of sub until it ends.
func (p *Plugin) dispatch(sub *bus.Subscription, fn *lua.LFunction) {
	defer p.wg.Done()
	for {
		m, err := sub.Next(context.Background())
		if err != nil {
			if !errors.Is(err, bus.ErrUnsubscribed) && !errors.Is(err, bus.ErrClosed) {
				p.log.Warn("rift plugin subscription ended", "pattern", sub.Pattern, "err", err)
			}
			return
		}
		p.mu.Lock()
		if p.L == nil {
			p.mu.Unlock()
			return
		}
		msg := p.L.NewTable()
		msg.RawSetString("subject", lua.LString(m.Subject))
		msg.RawSetString("reply", lua.LString(m.Reply))
		msg.RawSetString("payload", lua.LString(m.Payload))
		if _, err := p.sb.Run(p.budget, fn, 0, msg); err != nil {
			p.log.Warn("rift plugin callback failed", "subject", m.Subject, "err", err)
		}
		p.mu.Unlock()
	}
}
