package hexvec

import (
	"os"
	"path/filepath"
	"testing"
)

type color uint8

func (c color) String() string { return [...]string{"red", "blue"}[c] }

type Optional[T any] struct {
	Value   T
	Present bool
}

type inner struct{ N int }

type sample struct {
	Name    string
	Color   color
	Payload []byte
	Empty   []byte
	Maybe   Optional[string]
	Absent  Optional[int]
	Items   []inner
	Tags    map[string]string
	Nested  inner
	private int
}

func TestDump(t *testing.T) {
	got := Dump(&sample{
		Name: "q", Color: 1, Payload: []byte{0xab, 1}, Maybe: Optional[string]{"x", true},
		Items: []inner{{1}, {2}}, Tags: map[string]string{"b": "2", "a": "1"}, Nested: inner{7}, private: 9,
	})
	want := `Name: "q"
Color: blue
Payload: ab01
Empty: (empty)
Maybe: "x"
Absent: absent
Items: 2
  [0]:
    N: 1
  [1]:
    N: 2
Tags: 2
  ["a"]: "1"
  ["b"]: "2"
Nested:
  N: 7
`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestGoldenRewriteThenCompare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "testdata", "x.txt")
	*rewrite = true
	Golden(t, path, "a\nb\n")
	*rewrite = false
	if b, err := os.ReadFile(path); err != nil || string(b) != "a\nb\n" {
		t.Fatalf("rewrite wrote %q, %v", b, err)
	}
	Golden(t, path, "a\nb\n") // equal: passes
	if d := lineDiff("a\nb\n", "a\nc\n"); d != "line 2:\n  file: b\n  test: c\n" {
		t.Fatalf("lineDiff = %q", d)
	}
}
