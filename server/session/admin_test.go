package session

import (
	"bytes"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/storage"
)

// run encodes req, runs it through the admin table and returns the result frame and failure.
func run(t *testing.T, b *broker.Broker, req fibp.Frame) (fibp.Frame, *broker.Error) {
	t.Helper()
	h, ok := Admin(req.Opcode())
	if !ok {
		t.Fatalf("no handler for %v", req.Opcode())
	}
	res, e, err := h(b, Node{ID: 0, Addr: "127.0.0.1:1"}, req.AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	return res, e
}

func TestAdminTable(t *testing.T) {
	b, err := broker.Open(broker.Options{Store: storage.NewMem(), Sync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, tc := range []struct {
		req  fibp.Frame
		want fibp.ErrorCode
	}{
		{&fibp.CreateQueue{Name: "q"}, fibp.CodeOk},
		{&fibp.CreateQueue{Name: "q"}, fibp.CodeQueueAlreadyExists},
		{&fibp.CreateQueue{Name: "x.dlq"}, fibp.CodeReservedQueueName},
		{&fibp.CreateQueue{Name: "y", Backoff: 9}, fibp.CodeInvalidConfigValue},
		{&fibp.GetStats{Queue: "nope"}, fibp.CodeQueueNotFound},
		{&fibp.Redrive{DLQQueue: "q"}, fibp.CodeNotADLQ},
		{&fibp.Redrive{DLQQueue: "q.dlq"}, fibp.CodeOk},
		{&fibp.GetConfig{Key: "unset"}, fibp.CodeInvalidConfigValue},
		{&fibp.SetRebalancing{Mode: 7}, fibp.CodeInvalidConfigValue},
		{&fibp.GetRoutes{Queues: []fibp.QueueRef{{Queue: "nope"}}}, fibp.CodeQueueNotFound},
		{&fibp.DeleteQueue{Queue: "q"}, fibp.CodeOk},
		{&fibp.RevokeAPIKey{KeyID: "nope"}, fibp.CodeAPIKeyNotFound},
		{&fibp.SetACL{KeyID: "nope"}, fibp.CodeAPIKeyNotFound},
		{&fibp.SetACL{KeyID: "nope", Permissions: []fibp.ACLPermission{{Kind: "write", Pattern: "q"}}}, fibp.CodeInvalidConfigValue},
		{&fibp.GetACL{KeyID: "nope"}, fibp.CodeAPIKeyNotFound},
		{&fibp.CreateAPIKey{Name: ""}, fibp.CodeInvalidConfigValue},
	} {
		res, e := run(t, b, tc.req)
		got := fibp.CodeOk
		if e != nil {
			got = ErrorCode(e.Code)
		}
		errorFrame := Explained(e) && tc.req.Opcode() != fibp.OpGetConfig // GetConfig's result carries an unset key's code
		if got != tc.want || (res == nil) != errorFrame {
			t.Errorf("%T%+v: %v (%v), want %v (frame %T)", tc.req, tc.req, got, e, tc.want, res)
		}
	}
	if res, e := run(t, b, &fibp.ListAPIKeys{}); e != nil || len(res.(*fibp.ListAPIKeysResult).Keys) != 0 {
		t.Errorf("ListApiKeys: %v %v, want an empty list", res, e)
	}
	res, _ := run(t, b, &fibp.GetClusterStatus{})
	if s := res.(*fibp.GetClusterStatusResult); len(s.Nodes) != 1 || s.Nodes[0].Addr != "127.0.0.1:1" {
		t.Errorf("cluster status %+v", s)
	}
}

// The stored encoding of keys (keys.Key.AppendTo, keys.Decode) is the FIBP key layout.
func TestKeyEncodingIsFIBP(t *testing.T) {
	fk := fibp.Key{{Kind: fibp.KeyPartKind(0), Name: "tenant"}, {Kind: fibp.KeyPartKind(4)}, {Kind: fibp.KeyPartKind(2), Name: "job"}}
	k := KeyFromWire(fk)
	if got, want := k.AppendTo(nil), fk.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("keys encode %x, FIBP %x", got, want)
	}
	back, err := keys.Decode(fk.AppendTo(nil))
	if err != nil || !slices.Equal(back, k) {
		t.Fatalf("decoding the FIBP bytes: %v, %v", back, err)
	}
}
