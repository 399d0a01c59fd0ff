package specseed

import (
	"bufio"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------------------------
// Rift

var riftRow = regexp.MustCompile(`^\| (\d+) \| ([A-Z_]+) \| ([^|]*) \| ([^|]*) \|$`)

type riftOp struct {
	name, body, answer string
}

func riftTable(t *testing.T) map[int]riftOp {
	ops := map[int]riftOp{}
	f, err := os.Open(riftMD)
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("source %s not present: the seed tables are test data kept in the repository", riftMD)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := riftRow.FindStringSubmatch(sc.Text()); m != nil {
			op, _ := strconv.Atoi(m[1])
			if _, dup := ops[op]; dup {
				t.Fatalf("rift.md lists opcode %d twice", op)
			}
			ops[op] = riftOp{name: m[2], body: strings.TrimSpace(m[3]), answer: strings.TrimSpace(m[4])}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ops
}

func normName(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }

func TestRiftMatchesTable(t *testing.T) {
	ops := riftTable(t)
	s := loadSpec(t, riftYAML)

	if len(ops) != 15 {
		t.Errorf("rift.md opcode table has %d rows, want 15", len(ops))
	}
	if len(s.Frames) != 15 {
		t.Errorf("rift.yaml has %d frames, want 15", len(s.Frames))
	}
	f := s.Framing
	if s.Protocol != "rift" || f.Length != "u32" || len(f.Header) != 1 || f.Header[0].Type != "opcode" || f.MinFrame != 1 || f.MaxFrame != 1114112 || f.Trailing != "reject" {
		t.Errorf("rift.yaml: protocol %q framing %+v", s.Protocol, f)
	}

	// The table writes every string as str and the rest of the frame as payload.
	fl := &flattener{s: s, resolve: func(typ string) string {
		switch typ {
		case "str", "subject":
			return "str"
		}
		return typ
	}}
	seen := map[int]bool{}
	for i, fr := range s.Frames {
		if seen[fr.Opcode] {
			t.Errorf("rift.yaml: opcode %d appears twice", fr.Opcode)
		}
		seen[fr.Opcode] = true
		if i > 0 && s.Frames[i-1].Opcode >= fr.Opcode {
			t.Errorf("rift.yaml: opcode %d %s out of order", fr.Opcode, fr.Name)
		}
		want, ok := ops[fr.Opcode]
		if !ok {
			t.Errorf("rift.yaml: frame %s has opcode %d, not in rift.md", fr.Name, fr.Opcode)
			continue
		}
		if normName(fr.Name) != normName(want.name) {
			t.Errorf("opcode %d: name %q, rift.md says %q", fr.Opcode, fr.Name, want.name)
		}
		dir := "client"
		if strings.HasPrefix(want.answer, "server") {
			dir = "server"
		}
		if fr.Direction != dir {
			t.Errorf("opcode %d %s: direction %q, want %q (answer %q)", fr.Opcode, fr.Name, fr.Direction, dir, want.answer)
		}
		if fr.Group != "messaging" {
			t.Errorf("opcode %d %s: group %q, want messaging", fr.Opcode, fr.Name, fr.Group)
		}

		var wantTokens []token
		if want.body != "(empty)" {
			for _, part := range strings.Split(want.body, ",") {
				part = strings.TrimSpace(part)
				if part == "payload" {
					wantTokens = append(wantTokens, token{typ: "payload", name: "payload"})
					continue
				}
				name, typ, ok := strings.Cut(part, ":")
				if !ok {
					t.Fatalf("rift.md opcode %d: cannot parse body part %q", fr.Opcode, part)
				}
				wantTokens = append(wantTokens, token{typ: typ, name: name})
			}
		}
		got, err := fl.fields(fr.Fields)
		if err != nil {
			t.Errorf("opcode %d %s: %v", fr.Opcode, fr.Name, err)
			continue
		}
		if !sameTokens(got, wantTokens) {
			t.Errorf("opcode %d %s: layout differs\n yaml:    %v\n rift.md: %v", fr.Opcode, fr.Name, got, wantTokens)
		}
		for j, fd := range fr.Fields {
			if fd.Type == "payload" && j != len(fr.Fields)-1 {
				t.Errorf("opcode %d %s: payload is not the last field", fr.Opcode, fr.Name)
			}
		}
	}
	for op, want := range ops {
		if !seen[op] {
			t.Errorf("rift.yaml lacks opcode %d %s", op, want.name)
		}
	}
	checkDocs(t, "rift", s)
}
