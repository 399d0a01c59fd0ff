// Package check applies the rules that a loaded protocol model must follow before code is emitted
// from it: every frame, field, record, enum and enum value is documented (the prose becomes the Go
// doc of the generated code), no record contains itself, a rest-of-frame field comes last, frame
// limits fit the framing. (Rules that resolving names needs — unknown types, duplicates, bad
// names — stay with the loader in gen/spec.) Spec reads and resolves a file;
// check judges the result; emit renders it.
//
// Check reports every problem at once, each as "file:line: message", in line order.
package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/filamq/fila/gen/spec"
)

// Check returns every rule s breaks, or nil.
func Check(s *spec.Spec) spec.Errors {
	c := &checker{file: s.File}
	c.docs(s)
	c.framing(s)
	c.frames(s)
	if strings.HasPrefix(strings.TrimSpace(s.Doc), "Package ") {
		c.errf(1, "doc: the generator writes \"Package %s is the %s, version %d: \" in front of doc; do not repeat it", s.Protocol, s.Title, s.Version)
	}
	c.cycles(s)
	if len(c.errs) == 0 {
		return nil
	}
	sort.SliceStable(c.errs, func(i, j int) bool { return c.errs[i].Line < c.errs[j].Line })
	return c.errs
}

type checker struct {
	file string
	errs spec.Errors
}

func (c *checker) errf(line int, format string, args ...any) {
	c.errs = append(c.errs, spec.Error{File: c.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// framing checks the frame limits against the header.
func (c *checker) framing(s *spec.Spec) {
	f := s.Framing
	if n := f.HeaderSize(); len(f.Header) > 0 && f.MinFrame < n {
		c.errf(f.Line, "framing: min_frame %d is smaller than the %d-byte header", f.MinFrame, n)
	}
}

// frames checks what a frame's or record's fields and limits must satisfy to be encodable.
func (c *checker) frames(s *spec.Spec) {
	if len(s.Frames) == 0 {
		c.errf(1, "no frames")
	}
	restLast := func(owner string, fs []*spec.Field) {
		for i, f := range fs {
			if t := f.Type; t.Kind == spec.TScalar && t.Scalar.Rest && i != len(fs)-1 {
				c.errf(f.Line, "%s.%s: %s takes the rest of the frame and must be the last field", owner, f.Name, t.Scalar.Name)
			}
		}
	}
	for _, fr := range s.Frames {
		restLast(fr.Name, fr.Fields)
		if fr.MaxBody < 0 || fr.MaxBody > s.Framing.MaxFrame {
			c.errf(fr.Line, "frame %s: max_body %d outside 0..max_frame", fr.Name, fr.MaxBody)
		}
	}
	for _, r := range s.Records {
		restLast(r.Name, r.Fields)
	}
}

// docs requires prose on everything that becomes a documented Go declaration.
func (c *checker) docs(s *spec.Spec) {
	need := func(doc string, line int, what string) {
		if strings.TrimSpace(doc) == "" {
			c.errf(line, "%s has no doc", what)
		}
	}
	fields := func(owner string, fs []*spec.Field) {
		for _, f := range fs {
			need(f.Doc, f.Line, fmt.Sprintf("field %s.%s", owner, f.Name))
		}
	}
	fields("framing.header", s.Framing.Header)
	for _, fr := range s.Frames {
		need(fr.Doc, fr.Line, "frame "+fr.Name)
		fields(fr.Name, fr.Fields)
	}
	for _, r := range s.Records {
		if !r.Inline { // an inline record's doc is its field's, checked with the field
			need(r.Doc, r.Line, "record "+r.Name)
		}
		fields(r.Name, r.Fields)
	}
	for _, l := range s.Lists {
		need(l.Doc, l.Line, "list "+l.Name)
	}
	for _, en := range s.Enums {
		need(en.Doc, en.Line, "enum "+en.Name)
		for _, v := range en.Values {
			need(v.Doc, v.Line, fmt.Sprintf("enum value %s.%s", en.Name, v.Name))
		}
	}
}

// cycles refuses records that contain themselves, which no finite frame could encode.
func (c *checker) cycles(s *spec.Spec) {
	const (
		visiting = 1
		done     = 2
	)
	state := map[*spec.Record]int{}
	var visit func(r *spec.Record) bool
	var visitType func(t *spec.Type) bool
	visitType = func(t *spec.Type) bool {
		switch t.Kind {
		case spec.TRecord:
			return visit(t.Record)
		case spec.TList:
			return t.List.Item != nil && visit(t.List.Item)
		case spec.TOptional, spec.TRepeated, spec.TArray:
			return visitType(t.Elem)
		}
		return false
	}
	visit = func(r *spec.Record) bool {
		switch state[r] {
		case visiting:
			return true
		case done:
			return false
		}
		state[r] = visiting
		for _, f := range r.Fields {
			if visitType(f.Type) {
				c.errf(r.Line, "record %q contains itself", r.Name)
				break
			}
		}
		state[r] = done
		return false
	}
	for _, r := range s.Records {
		visit(r)
	}
}
