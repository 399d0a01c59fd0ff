// Package emit renders a validated spec.Spec as Go source with jennifer.
//
// Files returns every file of a protocol package as name → formatted source; it is a pure function
// of the spec, so running the generator twice yields identical bytes. The emitted code depends on
// the standard library and github.com/filamq/fila/generated/wire only (tests also use go-cmp).
//
// One emitter per artifact (a file each, or files of about linesPerFile lines for the frames of
// a group, their round-trip tests and the enums): protocol.go (package doc, framing constants),
// header.go (the frame header and AppendFrame), opcodes.go (the opcode table and dispatcher),
// enums.go (enums, bit sets, constants), frames.go (frame and record types), codec.go (the
// statements that size, encode, decode and check a value), layout.go (the byte layout in each
// type's doc), roundtrip.go and fuzz.go (the generated tests and fuzz targets), examples.go (the
// spec's examples as golden test data), doc.go (spec prose as Go comments).
package emit

import (
	"bytes"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	. "github.com/dave/jennifer/jen"

	"github.com/filamq/fila/gen/spec"
)

const (
	wirePkg = "github.com/filamq/fila/generated/wire"
	cmpPkg  = "github.com/google/go-cmp/cmp"
	cmpopts = "github.com/google/go-cmp/cmp/cmpopts"
)

// Generated reports whether a file name in an output folder belongs to the generator, so that
// files it no longer emits can be removed.
func Generated(name string) bool {
	return strings.HasSuffix(name, ".gen.go") || strings.HasSuffix(name, "_gen_test.go")
}

type emitter struct {
	s      *spec.Spec
	source string // the spec path as written in headers
	owner  map[*spec.Record]string

	// ownerFrame is the frame whose file declares an inline record (nil for records that
	// belong to named records).
	ownerFrame map[*spec.Record]*spec.Frame
}

// Files renders every file of the protocol package described by s. source is the spec's path as
// it should appear in the "Code generated" header (e.g. "spec/fibp.yaml").
func Files(s *spec.Spec, source string) (map[string][]byte, error) {
	e := &emitter{s: s, source: filepath.ToSlash(source), owner: map[*spec.Record]string{}, ownerFrame: map[*spec.Record]*spec.Frame{}}
	e.assignOwners()
	out := map[string][]byte{}
	render := func(name string, f *File) error {
		var buf bytes.Buffer
		if err := f.Render(&buf); err != nil {
			return fmt.Errorf("emit %s: %w", name, err)
		}
		out[name] = buf.Bytes()
		return nil
	}
	if err := render("protocol.gen.go", e.protocolFile()); err != nil {
		return nil, err
	}
	if len(e.s.Enums)+len(e.s.Bitsets)+len(e.s.Constants) > 0 {
		// Measured without the file's header, as the round-trip samples are.
		empty := renderedLines(e.enumsFile(nil))
		declLines := func(d func(f *File)) int { return renderedLines(e.enumsFile([]func(f *File){d})) - empty }
		for i, chunk := range chunkBy(e.enumDecls(), declLines) {
			if err := render(chunkName("enums", "", i, ".gen.go"), e.enumsFile(chunk)); err != nil {
				return nil, err
			}
		}
	}
	if len(e.s.Lists) > 0 || len(e.s.Records) > len(e.owner) {
		if err := render("records.gen.go", e.recordsFile()); err != nil {
			return nil, err
		}
	}
	for _, g := range e.groups() {
		frameLines := func(fr *spec.Frame) int { return renderedLines(e.framesFile([]*spec.Frame{fr})) }
		for i, chunk := range e.chunks(g, frameLines) {
			if err := render(chunkName("frames_", g, i, ".gen.go"), e.framesFile(chunk)); err != nil {
				return nil, err
			}
		}
	}
	if err := render("dispatch.gen.go", e.dispatchFile()); err != nil {
		return nil, err
	}
	var caseFuncs []string // one per file of round-trip samples
	// A round-trip sample is a few lines: measured without the file's header and imports.
	empty := renderedLines(e.roundTripGroupFile("roundTripCases", nil))
	sampleLines := func(fr *spec.Frame) int {
		return renderedLines(e.roundTripGroupFile("roundTripCases", []*spec.Frame{fr})) - empty
	}
	for _, g := range e.groups() {
		for i, chunk := range e.chunks(g, sampleLines) {
			fn := "roundTripCases" + spec.GoName(chunkName("", g, i, ""))
			caseFuncs = append(caseFuncs, fn)
			if err := render(chunkName("roundtrip_", g, i, "_gen_test.go"), e.roundTripGroupFile(fn, chunk)); err != nil {
				return nil, err
			}
		}
	}
	if err := render("roundtrip_gen_test.go", e.roundTripFile(caseFuncs)); err != nil {
		return nil, err
	}
	if err := render("fuzz_gen_test.go", e.fuzzFile()); err != nil {
		return nil, err
	}
	if f := e.examplesFile(); f != nil {
		if err := render("examples_gen_test.go", f); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// chunkName names the i'th file of a group's frames: prefix+group+suffix, then with _2, _3, ….
func chunkName(prefix, group string, i int, suffix string) string {
	if i == 0 {
		return prefix + group + suffix
	}
	return fmt.Sprintf("%s%s_%d%s", prefix, group, i+1, suffix)
}

func (e *emitter) newFile(test bool) *File {
	pkg := e.s.Protocol
	f := NewFile(pkg)
	f.HeaderComment(fmt.Sprintf("Code generated by filagen from %s. DO NOT EDIT.", e.source))
	f.ImportName(wirePkg, "wire")
	for _, imp := range e.s.Imports {
		f.ImportName(imp.Go, path.Base(imp.Go))
	}
	if test {
		f.ImportName(cmpPkg, "cmp")
		f.ImportName(cmpopts, "cmpopts")
	}
	return f
}

// groups lists the frame groups in order of first appearance.
func (e *emitter) groups() []string {
	var gs []string
	seen := map[string]bool{}
	for _, fr := range e.s.Frames {
		if !seen[fr.Group] {
			seen[fr.Group] = true
			gs = append(gs, fr.Group)
		}
	}
	return gs
}

// assignOwners decides which file declares each inline record: the group of the first frame
// that uses it; inline records of named records go with the named records.
func (e *emitter) assignOwners() {
	var walk func(t *spec.Type, owner string, fr *spec.Frame)
	walk = func(t *spec.Type, owner string, fr *spec.Frame) {
		switch t.Kind {
		case spec.TRecord:
			if t.Record.Inline {
				if _, ok := e.owner[t.Record]; !ok {
					e.owner[t.Record], e.ownerFrame[t.Record] = owner, fr
					for _, f := range t.Record.Fields {
						walk(f.Type, owner, fr)
					}
				}
			}
		case spec.TOptional, spec.TRepeated, spec.TArray:
			walk(t.Elem, owner, fr)
		}
	}
	for _, r := range e.s.Records {
		if !r.Inline {
			for _, f := range r.Fields {
				walk(f.Type, "", nil)
			}
		}
	}
	for _, fr := range e.s.Frames {
		for _, f := range fr.Fields {
			walk(f.Type, fr.Group, fr)
		}
	}
}
