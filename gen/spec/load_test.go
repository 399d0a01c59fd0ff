package spec

import (
	"os"
	"strings"
	"testing"
)

func loadMinimal(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseMinimal(t *testing.T) {
	s, err := Parse("minimal.yaml", []byte(loadMinimal(t)))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Frames) != 1 || s.Frames[0].Name != "Hello" || len(s.Frames[0].Fields) != 4 {
		t.Fatalf("frames: %+v", s.Frames)
	}
	pairs := s.Frames[0].Fields[2].Type
	if pairs.Kind != TRepeated || pairs.Count.Name != "u32" || pairs.Elem.Record.Name != "hello_item" || !pairs.Elem.Record.Inline {
		t.Fatalf("repeated group resolved as %+v", pairs)
	}
	if tags := pairs.Elem.Record.Fields[1].Type; tags.Kind != TArray || tags.Count.Name != "u16" {
		t.Fatalf("str[] resolved as %+v", tags)
	}
	if body := s.Frames[0].Fields[3].Type; body.Scalar == nil || !body.Scalar.Rest || body.Scalar.Max != 500 {
		t.Fatalf("payload resolved as %+v", body)
	}
}

// TestParseRefusesBadSpecs edits the minimal spec in one place each and expects the loader to
// name the file, the line and the problem.
func TestParseRefusesBadSpecs(t *testing.T) {
	cases := []struct {
		name, old, new, want string
	}{
		{"unknown type", "{name: who, type: str,", "{name: who, type: strng,", `minimal.yaml:40: Hello.who: unknown type "strng"`},
		{"duplicate field", "{name: color, type: color,", "{name: who, type: color,", `minimal.yaml:41: Hello: duplicate field "who" (first on line 40)`},
		{"duplicate opcode", "frames:\n", "frames:\n  - {opcode: 1, name: Other, direction: server, group: main}\n", "opcode 0x01 already used by Other"},
		{"count without a collection", "      - {name: body, type: payload,", "      - {name: body, count: u16,", "Hello.body: a repeated group needs item"},
		{"fields without count", "        count: u32\n", "", "without count"},
		{"item without count", "      - {name: color, type: color,", "      - {name: color, type: color, item: x,", "item without count"},
		{"count of a string", "        count: u32", "        count: str", `count: "str" is not an unsigned integer type`},
		{"unknown key", "    direction: client", "    direction: client\n    directoin: server", `unknown key "directoin"`},
		{"optional payload", "{name: b, type: optional<u32>,", "{name: b, type: optional<payload>,", "optional<payload> is not allowed"},
		{"bad direction", "direction: client", "direction: sideways", "direction must be client, server or both"},
		{"enum value too big", "{value: 1, name: blue,", "{value: 300, name: blue,", "does not fit u8"},
		{"duplicate enum value", "{value: 1, name: blue,", "{value: 0, name: blue,", "value 0x0 already used"},
		{"max beyond prefix", "length: u16, max: 100", "length: u16, max: 70000", "does not fit a u16 prefix"},
		{"bad trailing rule", "trailing: reject", "trailing: maybe", "trailing must be ignore or reject"},
		{"camel field", "{name: who, type: str,", "{name: Who, type: str,", `field name "Who" must be snake_case`},
		{"header without opcode", "type: opcode, doc: The operation.}", "type: u8, doc: The operation.}", "needs exactly one field of type opcode, has 0"},
		{"header of strings", "  header:\n", "  header:\n    - {name: tag, type: str, doc: A tag.}\n", "framing.header.tag: str is not an unsigned integer"},
		{"no length prefix", "  length: u32\n", "", "framing: no length"},
		{"group on a plain record", "  - name: pair\n", "  - name: pair\n    group: main\n", `record "pair": group and examples are for tagged records`},
		{"tagged record opcode clash", "records:\n", "records:\n  - {opcode: 1, name: hello_log, doc: Stored.}\n", "opcode 0x01 already used by Hello"},
		{"bad example hex", "    doc: Greets the server.\n", "    doc: Greets the server.\n    examples:\n      - {name: short, hex: [\"0g  # who\"]}\n", "frame Hello: example short: encoding/hex"},
		{"bad example name", "    doc: Greets the server.\n", "    doc: Greets the server.\n    examples:\n      - {name: Short, hex: [\"00\"]}\n", `example name "Short" must be kebab-case`},
		{"yaml syntax", "records:", "records: [", "minimal.yaml:"},
	}
	base := loadMinimal(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(base, tc.old) {
				t.Fatalf("test edit %q does not apply", tc.old)
			}
			_, err := Parse("minimal.yaml", []byte(strings.Replace(base, tc.old, tc.new, 1)))
			if err == nil {
				t.Fatal("bad spec accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
			if _, ok := err.(Errors); !ok {
				t.Fatalf("error is %T, want Errors", err)
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	bad := strings.Replace(loadMinimal(t), "type: str,", "type: nope,", -1)
	_, err := Parse("m.yaml", []byte(bad))
	es, ok := err.(Errors)
	if !ok || len(es) < 2 {
		t.Fatalf("want every unknown type reported, got %v", err)
	}
}

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{
		"request_id": "RequestID", "api_key": "APIKey", "dlq_queue": "DLQQueue", "QueueNotFound": "QueueNotFound",
		"ok": "Ok", "lease_expires_at": "LeaseExpiresAt", "key_id": "KeyID",
		"CreateApiKey": "CreateAPIKey", "SetAcl": "SetACL", "ApiKeyNotFound": "APIKeyNotFound",
		"SnapshotIdentity": "SnapshotIdentity", "HTTPError": "HTTPError", "Ok": "Ok",
	} {
		if got := GoName(in); got != want {
			t.Errorf("GoName(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"api_key": "apiKey", "message_id": "messageID", "queue": "queue"} {
		if got := GoLocal(in); got != want {
			t.Errorf("GoLocal(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRealSpecsLoad(t *testing.T) {
	for _, p := range []string{"../../spec/fibp.yaml", "../../spec/rift.yaml"} {
		if _, err := Load(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestTaggedRecords(t *testing.T) {
	base := loadMinimal(t)
	s, err := Parse("minimal.yaml", []byte(strings.Replace(base, "records:\n", "records:\n  - opcode: 7\n    name: hello_log\n    doc: A stored greeting.\n    fields:\n      - {name: who, type: str, doc: Who said it.}\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Records) != 2 { // pair and the inline hello_item; the tagged record is a frame
		t.Fatalf("records: %d", len(s.Records))
	}
	fr := s.Frames[len(s.Frames)-1]
	if fr.Name != "HelloLog" || fr.Kind != FrameRecord || fr.Opcode != 7 || fr.Group != "records" || fr.Direction != 0 {
		t.Fatalf("tagged record resolved as %+v", fr)
	}
}

func TestImport(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("minimal.yaml", loadMinimal(t))
	user := strings.Replace(loadMinimal(t), "protocol: mini\n", "import:\n  - {spec: minimal.yaml, go: example.com/mini}\nprotocol: user\n", 1)
	user = strings.Replace(user, "{name: color, type: color,", "{name: color, type: mini.color,", 1)
	s, err := Load(write("user.yaml", user))
	if err != nil {
		t.Fatal(err)
	}
	en := s.Frames[0].Fields[1].Type.Enum
	if en == nil || en.From == nil || en.From.Go != "example.com/mini" || en.Name != "color" || len(s.Enums) != 1 {
		t.Fatalf("imported enum resolved as %+v (own enums %d)", en, len(s.Enums))
	}
	user = strings.Replace(user, "{name: pair, type: pair,", "{name: pair, type: mini.pair,", 1)
	if s, err = Load(write("user.yaml", user)); err != nil {
		t.Fatal(err)
	}
	if rec := s.Frames[0].Fields[2].Type.Elem.Record.Fields[0].Type.Record; rec == nil || rec.From == nil || rec.From.Go != "example.com/mini" || rec.Name != "pair" {
		t.Fatalf("imported record resolved as %+v", rec)
	}
	// copy: declares the imported enum as the spec's own, from the one definition; no Go import.
	ownEnum := "enums:\n  - name: color\n    type: u8\n    prefix: Color\n    doc: A colour.\n    values:\n      - {value: 0, name: red, doc: The colour of fire.}\n      - {value: 1, name: blue, doc: The colour of the sea.}\n"
	copied := strings.Replace(loadMinimal(t), "protocol: mini\n", "import:\n  - {spec: minimal.yaml, copy: [color]}\nprotocol: copier\n", 1)
	if !strings.Contains(copied, ownEnum) {
		t.Fatal("the minimal spec's color enum moved; update this test")
	}
	s, err = Load(write("copier.yaml", strings.Replace(copied, ownEnum, "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	en = s.Frames[0].Fields[1].Type.Enum
	if en == nil || en.From != nil || en.CopiedFrom != "minimal.yaml" || len(s.Enums) != 1 || s.Enums[0] != en || len(en.Values) != 2 || len(s.Imports) != 0 {
		t.Fatalf("copied enum resolved as %+v (own enums %d, imports %d)", en, len(s.Enums), len(s.Imports))
	}
	if _, err := Load(write("twice.yaml", copied)); err == nil || !strings.Contains(err.Error(), `enum "color" already declared`) {
		t.Fatalf("a copy of an enum declared here too: %v", err)
	}
	nope := strings.Replace(copied, "copy: [color]", "copy: [colour]", 1)
	if _, err := Load(write("unknown.yaml", nope)); err == nil || !strings.Contains(err.Error(), `copy: no enum "colour"`) {
		t.Fatalf("a copy of an unknown enum: %v", err)
	}
	self := strings.Replace(loadMinimal(t), "protocol: mini\n", "import:\n  - {spec: self.yaml, go: example.com/self}\nprotocol: self\n", 1)
	if _, err := Load(write("self.yaml", self)); err == nil || !strings.Contains(err.Error(), "self.yaml imports itself") {
		t.Fatalf("an import cycle: %v", err)
	}
	missing := strings.Replace(loadMinimal(t), "protocol: mini\n", "import:\n  - {spec: nope.yaml, go: example.com/nope}\nprotocol: m\n", 1)
	if _, err := Load(write("missing.yaml", missing)); err == nil || !strings.Contains(err.Error(), "missing.yaml:2: import:") {
		t.Fatalf("a missing import: %v", err)
	}
}
