package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
)

func TestRegistry(t *testing.T) {
	sum := sha256.Sum256([]byte("hashed"))
	r, err := NewRegistry([]Config{
		{Name: "plain", Token: "s3cret", Publish: []string{"a.>"}},
		{Name: "hashed", TokenSHA256: hex.EncodeToString(sum[:]), Subscribe: []string{"b.*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := r.Authenticate("s3cret"); !ok || id.Name != "plain" {
		t.Fatalf("token: %v %v", id, ok)
	}
	if id, ok := r.Authenticate("hashed"); !ok || id.Name != "hashed" {
		t.Fatalf("token_sha256: %v %v", id, ok)
	}
	for _, bad := range []string{"", "S3cret", "s3cret "} {
		if _, ok := r.Authenticate(bad); ok {
			t.Errorf("%q authenticated", bad)
		}
	}
	if _, ok := r.Lookup("hashed"); !ok {
		t.Error("Lookup")
	}
	for _, cfgs := range [][]Config{
		{{Name: "x"}}, // no token
		{{Name: "x", Token: "a", TokenSHA256: "00"}},         // both
		{{Name: "x", TokenSHA256: "zz"}},                     // not hex
		{{Name: "bad name", Token: "a"}},                     // name syntax
		{{Name: "x", Token: "a", Publish: []string{"a..b"}}}, // pattern syntax
		{{Name: "x", Token: "a"}, {Name: "y", Token: "a"}},   // shared token
		{{Name: "x", Token: "a"}, {Name: "x", Token: "b"}},   // duplicate name
	} {
		if _, err := NewRegistry(cfgs); err == nil {
			t.Errorf("NewRegistry(%+v) accepted", cfgs)
		}
	}
}

func TestRules(t *testing.T) {
	game, _ := New("game", []string{"game.>"}, []string{"game.*", "_INBOX.game.>"}, false)
	noctl, _ := New("noctl", []string{">"}, []string{">"}, false)
	ctl, _ := New("ctl", []string{">"}, []string{">"}, true)
	for _, tc := range []struct {
		id   *Identity
		op   string
		s    string
		want bool
	}{
		{game, "pub", "game.x", true}, {game, "pub", "game", false}, {game, "pub", "x", false},
		{game, "sub", "game.x", true}, {game, "sub", "game.*", true}, {game, "sub", "game.>", false}, {game, "sub", ">", false},
		{game, "sub", "_INBOX.game.r.1", true}, {game, "sub", "_INBOX.>", false},
		{game, "reply", "_INBOX.game.r1", true}, {game, "reply", "_INBOX.other", false}, {game, "reply", "game.x", false},
		{game, "reply", "_INBOX", false}, {game, "reply", "_INBOX.game.*", false}, {game, "reply", "", true},
		{noctl, "sub", ">", false}, {noctl, "sub", "rift.control", false}, {noctl, "sub", "*.control", false},
		{noctl, "sub", "rift.events.>", true}, {noctl, "pub", "rift.control.status", false}, {noctl, "pub", "rift.controlx", true},
		{ctl, "sub", ">", true}, {ctl, "pub", "rift.control.status", true},
		{ctl, "pub", "rift.events", false}, {ctl, "pub", "rift.events.queue.created", false}, {ctl, "pub", "rift.eventsx", true},
	} {
		var err error
		switch tc.op {
		case "pub":
			err = tc.id.CheckPublish(tc.s)
		case "sub":
			err = tc.id.CheckSubscribe(tc.s)
		case "reply":
			err = tc.id.CheckReply(tc.s)
		}
		if got := err == nil; got != tc.want {
			t.Errorf("%s %s %q: allowed=%v, want %v (%v)", tc.id.Name, tc.op, tc.s, got, tc.want, err)
		}
		if err != nil && !errors.Is(err, ErrDenied) {
			t.Errorf("%v does not wrap ErrDenied", err)
		}
	}
}
