package broker

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the runtime config table of docs/configuration.md")

// docs/configuration.md lists every runtime config key of knownConfig with its default and
// meaning; `go test ./server/broker -run TestRuntimeConfigReference -update-docs` rewrites it.
func TestRuntimeConfigReference(t *testing.T) {
	var b strings.Builder
	b.WriteString("| key | default | |\n| --- | --- | --- |\n")
	d := DefaultDefaults()
	for _, k := range knownKeys() {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", k, knownConfig[k].get(&d), knownConfig[k].doc)
	}
	const path = "../../docs/configuration.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- runtime:begin -->\n", "<!-- runtime:end -->"
	i, j := strings.Index(string(data), begin), strings.Index(string(data), end)
	if i < 0 || j < i {
		t.Fatalf("%s has no runtime region", path)
	}
	if string(data[i+len(begin):j]) == b.String() {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(string(data[:i+len(begin)])+b.String()+string(data[j:])), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's runtime config table is stale: run go test ./server/broker -run TestRuntimeConfigReference -update-docs", path)
}
