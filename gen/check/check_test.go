package check

import (
	"os"
	"strings"
	"testing"

	"github.com/filamq/fila/gen/spec"
)

func parse(t *testing.T, edit func(string) string) *spec.Spec {
	t.Helper()
	b, err := os.ReadFile("../spec/testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := spec.Parse("minimal.yaml", []byte(edit(string(b))))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMinimalAndRealSpecsPass(t *testing.T) {
	if errs := Check(parse(t, func(s string) string { return s })); errs != nil {
		t.Fatal(errs)
	}
	for _, p := range []string{"fibp", "rift", "store", "riftstore", "queuelog"} {
		s, err := spec.Load("../../spec/" + p + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		if errs := Check(s); errs != nil {
			t.Errorf("%s: %v", p, errs)
		}
	}
}

// TestEveryMissingDocIsReported removes every doc from the fixture and expects one error per
// documented element, each with its line, all at once.
func TestEveryMissingDocIsReported(t *testing.T) {
	s := parse(t, func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if i := strings.Index(l, ", doc:"); i >= 0 {
				l = l[:i] + "}"
			}
			if strings.TrimSpace(l) != "" && strings.HasPrefix(strings.TrimSpace(l), "doc:") {
				continue
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n")
	})
	errs := Check(s)
	want := []string{
		"minimal.yaml:7: field framing.header.opcode has no doc",
		"minimal.yaml:20: enum color has no doc",
		"minimal.yaml:24: enum value color.red has no doc",
		"minimal.yaml:25: enum value color.blue has no doc",
		"minimal.yaml:27: record pair has no doc",
		"minimal.yaml:29: field pair.a has no doc",
		"minimal.yaml:30: field pair.b has no doc",
		"minimal.yaml:32: frame Hello has no doc",
		"minimal.yaml:37: field Hello.who has no doc",
		"minimal.yaml:38: field Hello.color has no doc",
		"minimal.yaml:39: field Hello.pairs has no doc",
		"minimal.yaml:43: field hello_item.pair has no doc",
		"minimal.yaml:44: field hello_item.tags has no doc",
		"minimal.yaml:45: field Hello.body has no doc",
	}
	if got := strings.Split(errs.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRecordCycle(t *testing.T) {
	s := parse(t, func(s string) string {
		return strings.Replace(s, "{name: b, type: optional<u32>,", "{name: b, type: optional<pair>,", 1)
	})
	errs := Check(s)
	if len(errs) != 1 || errs[0].Line != 28 || !strings.Contains(errs[0].Msg, `record "pair" contains itself`) {
		t.Fatalf("got %v", errs)
	}
}

func TestModelRules(t *testing.T) {
	for _, tc := range []struct{ name, old, new, want string }{
		{"rest not last", "      - {name: who, type: str,", "      - {name: who, type: payload,", "minimal.yaml:40: Hello.who: payload takes the rest of the frame and must be the last field"},
		{"header beyond min_frame", "    - {name: opcode,", "    - {name: stream, type: u32, doc: A stream.}\n    - {name: opcode,", "minimal.yaml:5: framing: min_frame 1 is smaller than the 5-byte header"},
		{"max_body beyond max_frame", "    group: main\n", "    group: main\n    max_body: 5000\n", "minimal.yaml:34: frame Hello: max_body 5000 outside 0..max_frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := parse(t, func(s string) string {
				if !strings.Contains(s, tc.old) {
					t.Fatalf("edit %q does not apply", tc.old)
				}
				return strings.Replace(s, tc.old, tc.new, 1)
			})
			if errs := Check(s); errs.Error() != tc.want {
				t.Fatalf("got %v, want %s", errs, tc.want)
			}
		})
	}
}
