package config

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the settings table of docs/configuration.md")

const referencePath = "../../docs/configuration.md"

// settingsTable renders every setting as a row of docs/configuration.md: YAML key, flag,
// environment variable, default and help, from the same struct tags Load uses.
func settingsTable() string {
	var b strings.Builder
	b.WriteString("| YAML key | flag | environment | default | |\n| --- | --- | --- | --- | --- |\n")
	v := reflect.ValueOf(Default())
	for _, f := range fields() {
		key := f.yaml
		for _, section := range []string{"rift", "auth"} {
			if strings.HasPrefix(key, section+"_") {
				key = section + "." + key[len(section)+1:]
			}
		}
		def := fmt.Sprint(v.FieldByIndex(f.index).Interface())
		if def == "" {
			def = "—"
		} else {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | `--%s` | `%s` | %s | %s |\n", key, f.flag, f.env, def, strings.ReplaceAll(f.help, "|", "\\|"))
	}
	return b.String()
}

// docs/configuration.md lists every setting with its flag, variable and default as the code
// has them; `go test ./server/config -run TestConfigurationReference -update-docs` rewrites it.
func TestConfigurationReference(t *testing.T) {
	replaceRegion(t, referencePath, "settings", settingsTable(), *updateDocs)
}

// replaceRegion checks (or, with update, rewrites) the text between <!-- name:begin --> and
// <!-- name:end --> in the file at path.
func replaceRegion(t *testing.T, path, name, want string, update bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	i, j := strings.Index(string(data), begin), strings.Index(string(data), end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %s … %s region", path, strings.TrimSpace(begin), end)
	}
	got := string(data[i+len(begin) : j])
	if got == want {
		return
	}
	if update {
		out := string(data[:i+len(begin)]) + want + string(data[j:])
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's %s table is stale: run go test ./server/config -run TestConfigurationReference -update-docs", path, name)
}
