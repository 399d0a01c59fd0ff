package hooks

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

// AttributeSets shares one map among the classifications whose hook returned the same
// attributes: a queue's backlog then holds a few maps, not one per message, for the garbage
// collector to walk, and a call whose attributes were seen before makes no map at all. Maps it
// returns are shared and must never be changed. An AttributeSets is used by one goroutine at a
// time (a queue's actor); its zero value is ready.
type AttributeSets struct {
	maps  map[string]map[string]string // by canonical encoding
	key   []byte
	pairs []attrPair
}

type attrPair struct{ k, v lua.LString }

// maxInterned bounds the distinct attribute sets remembered; beyond it the table starts over.
const maxInterned = 1024

// maxInternedSize is the largest attribute set shared; larger ones get a map of their own.
const maxInternedSize = 8

// Intern returns the shared map equal to m (m itself the first time). A nil or empty m is
// returned as it is.
func (a *AttributeSets) Intern(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > maxInternedSize {
		return m
	}
	a.pairs = a.pairs[:0]
	for k, v := range m {
		a.pairs = append(a.pairs, attrPair{lua.LString(k), lua.LString(v)})
	}
	if shared, ok := a.lookup(); ok {
		return shared
	}
	a.remember(m)
	return m
}

// MaxAttributes is the most attributes on_enqueue may return for one message, and
// MaxAttributeBytes the most bytes their keys and values may hold together: they are stored
// with the message, whatever its size.
const (
	MaxAttributes     = 64
	MaxAttributeBytes = 64 << 10
)

// fromTable reads an attributes table (string keys to string values), making a map only for a
// set it has not seen; unless share, it makes a map of its own.
func (a *AttributeSets) fromTable(t *lua.LTable, share bool) (map[string]string, error) {
	a.pairs = a.pairs[:0]
	size := 0
	for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
		ks, kok := k.(lua.LString)
		vs, vok := v.(lua.LString)
		if !kok || !vok || len(ks) > math.MaxUint16 || len(vs) > math.MaxUint16 || !utf8.ValidString(string(ks)) || !utf8.ValidString(string(vs)) {
			return nil, scriptErrorf("on_enqueue: attributes must map UTF-8 strings to UTF-8 strings, got %s = %s", describe(k), describe(v))
		}
		if len(a.pairs) == MaxAttributes {
			return nil, scriptErrorf("on_enqueue: more than %d attributes", MaxAttributes)
		}
		if size += len(ks) + len(vs); size > MaxAttributeBytes {
			return nil, scriptErrorf("on_enqueue: attributes of more than %d bytes (keys and values together)", MaxAttributeBytes)
		}
		a.pairs = append(a.pairs, attrPair{ks, vs})
	}
	if len(a.pairs) == 0 {
		return nil, nil
	}
	share = share && len(a.pairs) <= maxInternedSize
	if share {
		if shared, ok := a.lookup(); ok {
			return shared, nil
		}
	}
	m := make(map[string]string, len(a.pairs))
	for _, p := range a.pairs {
		m[string(p.k)] = string(p.v)
	}
	if share {
		a.remember(m)
	}
	return m, nil
}

// lookup finds the shared map of a.pairs, leaving their canonical encoding in a.key.
func (a *AttributeSets) lookup() (map[string]string, bool) {
	slices.SortFunc(a.pairs, func(x, y attrPair) int { return strings.Compare(string(x.k), string(y.k)) })
	a.key = a.key[:0]
	for _, p := range a.pairs {
		a.key = binary.AppendUvarint(a.key, uint64(len(p.k)))
		a.key = append(a.key, p.k...)
		a.key = binary.AppendUvarint(a.key, uint64(len(p.v)))
		a.key = append(a.key, p.v...)
	}
	m, ok := a.maps[string(a.key)]
	return m, ok
}

// remember shares m under the encoding lookup left in a.key.
func (a *AttributeSets) remember(m map[string]string) {
	if a.maps == nil || len(a.maps) >= maxInterned {
		a.maps = map[string]map[string]string{}
	}
	a.maps[string(a.key)] = m
}
