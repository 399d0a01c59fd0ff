package buildinfo

import (
	"runtime"
	"testing"
)

func TestModuleVersion(t *testing.T) {
	for v, want := range map[string]string{
		"":                                   "devel",
		"(devel)":                            "devel",
		"v0.0.0-20261201115931-8a8d658c9b25": "devel",
		"v0.0.0-20261201115931-8a8d658c9b25+dirty":  "devel",
		"v1.2.4-0.20261201115931-8a8d658c9b25":      "devel",
		"v1.3.0-rc.1.0.20261201115931-8a8d658c9b25": "devel",
		"v1.2.3":       "v1.2.3",
		"v1.3.0-rc.1":  "v1.3.0-rc.1",
		"v1.2.3+dirty": "v1.2.3+dirty",
	} {
		if got := moduleVersion(v); got != want {
			t.Errorf("moduleVersion(%q) = %q, want %q", v, got, want)
		}
	}
}

func TestReadAndString(t *testing.T) {
	i := Read()
	if i.GoVersion != runtime.Version() || i.Version == "" || i.Commit == "" {
		t.Fatalf("Read() = %+v", i)
	}
	i = Info{Version: "v1.2.3", Commit: "8a8d658c9b2537b15fad1f593c5c955a6bce1413", Modified: true, GoVersion: "go1.26.0"}
	if got, want := i.String("fila"), "fila v1.2.3 (commit 8a8d658c9b2537b15fad1f593c5c955a6bce1413-dirty, go1.26.0)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}
