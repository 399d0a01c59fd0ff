package emit

import (
	"strings"

	. "github.com/dave/jennifer/jen"
)

// docComment renders spec prose as Go comment lines prefixed by name.
func docComment(name, doc string) []Code {
	doc = strings.TrimSpace(doc)
	if doc == "" {
		return nil
	}
	var out []Code
	for i, line := range strings.Split(doc, "\n") {
		if i == 0 && name != "" {
			line = sentence(name, line)
		}
		for _, l := range wrap(strings.TrimRight(line, " "), 96) {
			out = append(out, Comment(l))
		}
	}
	return out
}

// sentence makes a doc sentence that starts with name: "The queue name." becomes "X is the
// queue name.", "The node is up." becomes "X means the node is up.", "How it orders." becomes
// "X says how it orders."; other prose follows "X: ".
func sentence(name, doc string) string {
	first, _, _ := strings.Cut(doc, " ")
	lower := func() string {
		if len(doc) > 1 && doc[1] >= 'A' && doc[1] <= 'Z' { // an initialism: keep it
			return doc
		}
		return strings.ToLower(doc[:1]) + doc[1:]
	}
	switch first {
	case "The", "A", "An", "One":
		if clause(doc) {
			return name + " means " + lower()
		}
		return name + " is " + lower()
	case "What", "Which", "Where", "How", "Why", "When", "Whether":
		return name + " says " + lower()
	}
	return name + ": " + doc
}

// clauseVerbs mark a first sentence that is a clause ("the node is up") rather than a noun
// phrase ("the queue name").
var clauseVerbs = []string{" is ", " are ", " was ", " has ", " have ", " cannot ", " can ", " may ",
	" must ", " does ", " failed ", " timed out", " tried ", " fails ", " stays ", " goes "}

// clause reports whether the first sentence of doc (up to its first period, semicolon or colon,
// and before any relative clause) has a verb of its own.
func clause(doc string) bool {
	if i := strings.IndexAny(doc, ".;:"); i >= 0 {
		doc = doc[:i]
	}
	for _, rel := range []string{" which ", " whose ", " that ", " where ", " when ", " who "} {
		if i := strings.Index(doc, rel); i >= 0 {
			doc = doc[:i] // a relative clause's verb is not the sentence's
		}
	}
	doc += " "
	for _, v := range clauseVerbs {
		if strings.Contains(doc, v) {
			return true
		}
	}
	return false
}

// wrap breaks text into lines of at most width bytes at spaces (longer words stay whole).
func wrap(text string, width int) []string {
	var lines []string
	for len(text) > width {
		cut := strings.LastIndexByte(text[:width+1], ' ')
		if cut <= 0 {
			cut = strings.IndexByte(text, ' ')
			if cut < 0 {
				break
			}
		}
		lines = append(lines, text[:cut])
		text = strings.TrimLeft(text[cut:], " ")
	}
	return append(lines, text)
}

func comments(f *File, name, doc string) {
	for _, c := range docComment(name, doc) {
		f.Add(c)
	}
}
