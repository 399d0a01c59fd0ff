package service_test

import (
	"errors"
	"testing"

	"github.com/filamq/fila/server/rift/auth"
	"github.com/filamq/fila/server/rift/service"
	"github.com/filamq/fila/server/rift/stream"
)

// In process, a Session administers streams with the rights a REQUEST to the control subjects
// needs: control = true and a publish ACL covering them.
func TestSessionStreamAdministration(t *testing.T) {
	svc, err := service.Open(service.Options{StreamDir: t.TempDir(), Identities: []auth.Config{
		{Name: "ops", Token: "a", Publish: []string{"rift.control.>"}, Control: true},
		{Name: "reader", Token: "b", Publish: []string{"rift.control.stream.info", "rift.control.stream.list"}, Control: true},
		{Name: "app", Token: "c", Publish: []string{">"}, Subscribe: []string{">"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	session := func(name string) *service.Session {
		id, _ := svc.Auth.Lookup(name)
		return svc.Session(id)
	}
	cfg := stream.Config{Name: "jobs", Subjects: []string{"jobs.>"}}
	for _, who := range []string{"reader", "app"} {
		if _, _, err := session(who).CreateStream(cfg); !errors.Is(err, auth.ErrDenied) {
			t.Errorf("%s created a stream: %v", who, err)
		}
	}
	if _, err := session("app").Streams(); !errors.Is(err, auth.ErrDenied) {
		t.Errorf("app listed the streams: %v", err)
	}
	ops := session("ops")
	if in, created, err := ops.CreateStream(cfg); err != nil || !created || in.Name != "jobs" {
		t.Fatalf("ops: %+v %v %v", in, created, err)
	}
	if _, _, err := session("app").StreamPublish("jobs", "jobs.a", "", []byte("x")); err != nil {
		t.Errorf("publishing to the new stream: %v", err)
	}
	if in, err := session("reader").StreamInfo("jobs"); err != nil || in.Messages != 1 {
		t.Errorf("reader: %+v %v", in, err)
	}
	if err := session("reader").DeleteStream("jobs"); !errors.Is(err, auth.ErrDenied) {
		t.Errorf("reader deleted: %v", err)
	}
	if err := ops.DeleteStream("jobs"); err != nil {
		t.Fatal(err)
	}
	if err := ops.DeleteStream("jobs"); !errors.Is(err, service.ErrOperation) {
		t.Errorf("deleting twice: %v", err)
	}
	if list, err := session("reader").Streams(); err != nil || len(list) != 0 {
		t.Errorf("list: %+v %v", list, err)
	}
}
