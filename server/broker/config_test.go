package broker

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/filamq/fila/server/storage"
)

// A key under the broker's namespaces that it does not know is refused with the valid keys of
// that namespace; keys elsewhere are stored for scripts.
func TestSetConfigRefusesUnknownBrokerKeys(t *testing.T) {
	b, err := Open(Options{Store: storage.NewMem(), Sync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, ns := range brokerNamespaces {
		e := b.SetConfig(ns+"no_such_key", "1")
		if e == nil || e.Code != CodeInvalidConfigValue {
			t.Fatalf("SetConfig(%sno_such_key) = %v, want InvalidConfigValue", ns, e)
		}
		for _, k := range knownKeys() {
			if strings.HasPrefix(k, ns) != strings.Contains(e.Message, k) {
				t.Errorf("the refusal of %sno_such_key lists %q wrongly: %s", ns, k, e.Message)
			}
		}
		if _, e := b.GetConfig(ns + "no_such_key"); e == nil {
			t.Errorf("a refused key %sno_such_key was stored", ns)
		}
	}
	if e := b.SetConfig("app.greeting", "hi"); e != nil {
		t.Fatalf("a key outside the broker's namespaces: %v", e)
	}
	if e := b.SetConfig("lua.timeout_ms", "20"); e != nil {
		t.Fatalf("a known key: %v", e)
	}
}
