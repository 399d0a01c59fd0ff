package keys

import (
	"fmt"

	"github.com/filamq/fila/generated/wire"
)

// A Key is stored (queue definitions) in the layout of the FIBP `key` type, so that a stored
// definition reads like the CreateQueue that made it:
//
//	[u16 part_count] part_count × ([u8 kind] [u16 name length] [name, UTF-8])
//
// A test in server/session checks it against the generated FIBP codec.

// AppendTo appends k's encoding to b; no key encodes as nothing at all (an empty stored field).
func (k Key) AppendTo(b []byte) []byte {
	if len(k) == 0 {
		return b
	}
	b = wire.AppendCount(b, 2, len(k))
	for _, p := range k {
		b = wire.AppendU8(b, uint8(p.Kind))
		b = wire.AppendString16(b, p.Name)
	}
	return b
}

// Decode reads a key written by AppendTo (empty input is no key). It checks the encoding, not
// the key: Check it for its use.
func Decode(b []byte) (Key, error) {
	if len(b) == 0 {
		return nil, nil
	}
	r := wire.NewReader(b)
	k := make(Key, r.Count(2, 3))
	for i := range k {
		k[i].Kind = Kind(r.U8())
		k[i].Name = r.String(r.Len16(1<<16-1), true)
	}
	switch {
	case r.Err() != nil:
		return nil, fmt.Errorf("keys: %w", r.Err())
	case r.Len() != 0:
		return nil, fmt.Errorf("keys: %d bytes after the key", r.Len())
	}
	return k, nil
}
