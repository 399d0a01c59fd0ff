package emit

import (
	"fmt"
	"strings"

	. "github.com/dave/jennifer/jen"
)

// protocolFile declares the package doc, framing constants, the frame header, opcodes, enums,
// bit sets and string constants.
func (e *emitter) protocolFile() *File {
	s := e.s
	f := e.newFile(false)
	doc := strings.TrimSpace(s.Doc)
	if doc == "" {
		doc = s.Title + "."
	}
	f.PackageComment(fmt.Sprintf("Package %s is the %s, version %d: %s", s.Protocol, s.Title, s.Version, doc))

	fr := s.Framing
	f.Const().Defs(
		Comment("Version is the protocol version these codecs implement."),
		Id("Version").Op("=").Lit(s.Version),
		Comment("MinFrameSize is the smallest accepted value of a frame's length prefix."),
		Id("MinFrameSize").Op("=").Lit(fr.MinFrame),
		Comment("MaxFrameSize is the default largest value of a frame's length prefix."),
		Id("MaxFrameSize").Op("=").Lit(fr.MaxFrame),
		Comment("LengthSize is the size of the length prefix in front of every frame."),
		Id("LengthSize").Op("=").Lit(fr.Length.Size),
		Comment("HeaderSize is the size of the frame header that starts every frame body."),
		Id("HeaderSize").Op("=").Lit(fr.HeaderSize()),
		Comment("RejectsTrailing reports whether frame decoders refuse bytes after the last field."),
		Id("RejectsTrailing").Op("=").Lit(fr.RejectTrailing()),
	)
	e.header(f)
	e.opcodes(f)
	return f
}
