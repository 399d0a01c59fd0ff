package hexvec

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite golden files (testdata/*.txt) from what the tests produce")

// Golden compares got with the file at path; with -rewrite it writes got there instead, so that
// an intended change is one command and a reviewed diff.
func Golden(t testing.TB, path, got string) {
	t.Helper()
	if *rewrite {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -rewrite to create it)", err)
	}
	if !bytes.Equal(want, []byte(got)) {
		t.Fatalf("%s differs from what the test produced (review, then go test -rewrite):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff lists the first lines that differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var sb strings.Builder
	shown := 0
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&sb, "line %d:\n  file: %s\n  test: %s\n", i+1, wl, gl)
			if shown++; shown == 5 {
				break
			}
		}
	}
	return sb.String()
}

// Dump renders a decoded value one field a line, indented by nesting: enums and other Stringers
// by name, byte slices in hex, strings quoted, absent optionals as "absent", maps by sorted key.
func Dump(v any) string {
	var sb strings.Builder
	dump(&sb, "", reflect.ValueOf(v))
	return sb.String()
}

var stringer = reflect.TypeFor[fmt.Stringer]()

func dump(sb *strings.Builder, indent string, v reflect.Value) {
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	t := v.Type()
	if t.Kind() != reflect.Struct {
		fmt.Fprintf(sb, "%s%s\n", indent, scalar(v))
		return
	}
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if !f.IsExported() {
			continue
		}
		field(sb, indent, f.Name, fv)
	}
}

func field(sb *strings.Builder, indent, name string, v reflect.Value) {
	t := v.Type()
	switch {
	case t.Kind() == reflect.Struct && strings.HasPrefix(t.Name(), "Optional["):
		if !v.FieldByName("Present").Bool() {
			fmt.Fprintf(sb, "%s%s: absent\n", indent, name)
			return
		}
		field(sb, indent, name, v.FieldByName("Value"))
	case t.Implements(stringer) || t.Kind() == reflect.String || t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 ||
		t.Kind() != reflect.Struct && t.Kind() != reflect.Slice && t.Kind() != reflect.Map:
		fmt.Fprintf(sb, "%s%s: %s\n", indent, name, scalar(v))
	case t.Kind() == reflect.Struct:
		fmt.Fprintf(sb, "%s%s:\n", indent, name)
		dump(sb, indent+"  ", v)
	case t.Kind() == reflect.Slice:
		fmt.Fprintf(sb, "%s%s: %d\n", indent, name, v.Len())
		for i := range v.Len() {
			field(sb, indent+"  ", fmt.Sprintf("[%d]", i), v.Index(i))
		}
	case t.Kind() == reflect.Map:
		fmt.Fprintf(sb, "%s%s: %d\n", indent, name, v.Len())
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return scalar(keys[i]) < scalar(keys[j]) })
		for _, k := range keys {
			field(sb, indent+"  ", "["+scalar(k)+"]", v.MapIndex(k))
		}
	}
}

func scalar(v reflect.Value) string {
	t := v.Type()
	switch {
	case t.Implements(stringer):
		return v.Interface().(fmt.Stringer).String()
	case t.Kind() == reflect.String:
		return fmt.Sprintf("%q", v.String())
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		if v.Len() == 0 {
			return "(empty)"
		}
		return hex.EncodeToString(v.Bytes())
	}
	return fmt.Sprint(v.Interface())
}
