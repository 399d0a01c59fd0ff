package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Damage found before Pebble opens a directory. Pebble alone would start on some of it and lose
// acknowledged data without a word: it takes an unreadable chunk in the newest WAL for the torn
// tail of a write cut by a crash whenever no later chunk proves otherwise (its proof, a synced
// offset in later chunk headers, is often missing), and it takes a directory without its
// manifest marker for a new store, starting empty and deleting the old files as obsolete.
//
// So before opening, the store reads itself every WAL that Pebble will replay. A torn tail can
// only be the end of the newest file: an unreadable chunk followed by any valid chunk of the same
// log later in the file is damage, and the start stops with a *DamageError naming the file,
// unless the operator asked to salvage: then the WAL is cut at the damage (the original is kept
// beside it) and the report says what was dropped.

// ErrDamaged is what a *DamageError matches with errors.Is.
var ErrDamaged = errors.New("storage: damaged data")

// DamageError reports damage that stops a start.
type DamageError struct {
	File   string // the damaged file
	Detail string // what is wrong
	Hint   string // what the operator can do
}

func (e *DamageError) Error() string {
	msg := fmt.Sprintf("storage: %s: %s", e.File, e.Detail)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

// WAL chunk layout (pebble/record): every 32 KiB block holds whole chunks; a chunk is
//
//	checksum  u32 LE   masked CRC-32C of everything after the length field
//	length    u16 LE   payload bytes
//	encoding  u8       1..4 legacy, 5..8 recyclable, 9..12 WAL sync (full, first, middle, last)
//	log       u32 LE   the WAL's number (recyclable and WAL sync only)
//	offset    u64 LE   a synced offset (WAL sync only)
//	payload
const (
	walBlock         = 32 << 10
	legacyHeader     = 7
	recyclableHeader = 11
	walSyncHeader    = 19
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// walScan is what scanWAL found in one WAL file.
type walScan struct {
	size    int64
	records int // complete records before any damage
	// damaged: an unreadable chunk at damageAt, followed later in the file by validAfter valid
	// chunks of this log (validAfter 0: a torn tail), of which recordsAfter start a record,
	// in bytesAfter bytes.
	damaged                  bool
	damageAt                 int64
	validAfter, recordsAfter int
	bytesAfter               int64
	// closed: the file ends with the trailer Pebble writes when it closes a WAL (what follows is
	// left from the file's earlier life as another WAL).
	closed bool
}

// isDamage reports whether the scan found damage that loses data: anything but a torn tail of
// the newest WAL (newest).
func (s walScan) isDamage(newest bool) bool {
	return s.damaged && (s.validAfter > 0 || !newest)
}

// walNum is the number in a WAL file's name.
func walNum(path string) (uint64, error) {
	num, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), ".log"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("storage: WAL name %s: %w", path, err)
	}
	return num, nil
}

// scanWAL reads the WAL at path chunk by chunk.
func scanWAL(path string) (walScan, error) {
	num, err := walNum(path)
	if err != nil {
		return walScan{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return walScan{}, err
	}
	defer f.Close()
	var s walScan
	buf := make([]byte, walBlock)
	for block := int64(0); ; block++ {
		n, err := io.ReadFull(f, buf)
		if n == 0 {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return s, nil
			}
			return s, err
		}
		if err != nil && err != io.ErrUnexpectedEOF {
			return s, err
		}
		s.size += int64(n)
		scanBlock(buf[:n], uint32(num), block*walBlock, &s)
		if s.closed {
			return s, nil
		}
	}
}

// scanBlock parses one block's chunks into s, up to the first chunk that does not parse.
func scanBlock(b []byte, logNum uint32, base int64, s *walScan) {
	for off := 0; off+legacyHeader <= len(b); {
		c := chunkAt(b, off, logNum)
		switch c.kind {
		case chunkZeros:
			return // the zeroed rest of a block: padding, or never written
		case chunkTrailer:
			s.closed = true
			return
		case chunkInvalid:
			markInvalid(s, base+int64(off))
			return
		}
		if s.damaged {
			s.validAfter++
			s.bytesAfter += int64(c.length)
			if c.starts() {
				s.recordsAfter++
			}
		} else if c.completes() {
			s.records++
		}
		off = c.end
	}
}

// chunk is one chunk of a WAL block, as chunkAt parsed it.
type chunk struct {
	kind   chunkKind
	enc    byte // the encoding byte (a valid chunk's type)
	header int  // header bytes: 7, 11 or 19 by the chunk format
	length int  // payload bytes
	end    int  // offset in the block just past the chunk (a valid chunk)
}

type chunkKind uint8

const (
	chunkValid   chunkKind = iota
	chunkZeros             // the rest of the block is zeros
	chunkTrailer           // the EOF trailer Pebble writes when it closes a WAL
	chunkInvalid           // anything else: damage, or a tear
)

// starts reports whether the chunk begins a record (full or first).
func (c chunk) starts() bool {
	e := c.enc
	return e == 1 || e == 2 || e == 5 || e == 6 || e == 9 || e == 10
}

// completes reports whether the chunk ends a record (full or last).
func (c chunk) completes() bool {
	e := c.enc
	return e == 1 || e == 4 || e == 5 || e == 8 || e == 9 || e == 12
}

// chunkAt parses the chunk at off of block b of WAL logNum; off+legacyHeader <= len(b).
func chunkAt(b []byte, off int, logNum uint32) chunk {
	enc := b[off+6]
	hdr := legacyHeader
	switch {
	case enc >= 9 && enc <= 12:
		hdr = walSyncHeader
	case enc >= 5 && enc <= 8:
		hdr = recyclableHeader
	case enc >= 1 && enc <= 4:
	default:
		if enc == 0 && allZero(b[off:]) {
			return chunk{kind: chunkZeros}
		}
		return chunk{kind: chunkInvalid}
	}
	length := int(binary.LittleEndian.Uint16(b[off+4:]))
	end := off + hdr + length
	valid := off+hdr <= len(b) && end <= len(b) &&
		(hdr == legacyHeader || binary.LittleEndian.Uint32(b[off+7:]) == logNum) &&
		binary.LittleEndian.Uint32(b[off:]) == maskedCRC(b[off+6:end])
	switch {
	case valid:
		return chunk{kind: chunkValid, enc: enc, header: hdr, length: length, end: end}
	case enc == 5 && length == 0 && off+hdr <= len(b) && binary.LittleEndian.Uint32(b[off:]) == 0 &&
		binary.LittleEndian.Uint32(b[off+7:]) == logNum+1:
		return chunk{kind: chunkTrailer} // record.LogWriter.emitEOFTrailer
	}
	return chunk{kind: chunkInvalid}
}

func markInvalid(s *walScan, at int64) {
	if !s.damaged {
		s.damaged, s.damageAt = true, at
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// walFiles lists the WAL files of dir, oldest first.
func walFiles(dir string) ([]string, error) {
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	sort.Strings(logs) // zero-padded numbers: name order is age order
	return logs, err
}

// replayedWALs lists the WAL files of dir that Pebble replays when it opens dir, oldest first:
// those numbered at or above the manifest's oldest unflushed WAL (pebble open.go, "Replay any
// newer log files"). An older WAL is flushed already and only waits to be deleted; a crash inside
// Pebble's Open, after it flushed a torn newest WAL and created the next one but before it
// deleted the old, leaves one torn beside its successor. Pebble ignores it, and so does the check.
// When the manifest cannot be read, every WAL is listed (Pebble's open will report the manifest).
func replayedWALs(dir string) ([]string, error) {
	logs, err := walFiles(dir)
	if err != nil || len(logs) == 0 {
		return logs, err
	}
	oldest, ok := oldestUnflushedWAL(dir)
	if !ok {
		return logs, nil
	}
	for i, path := range logs {
		num, err := walNum(path)
		if err != nil {
			return nil, err
		}
		if num >= oldest {
			return logs[i:], nil
		}
	}
	return nil, nil
}

// oldestUnflushedWAL reads the current manifest of dir for the number of its oldest unflushed
// WAL (the last version edit that sets it, as pebble's versionSet.load does); ok is false when
// the manifest cannot be read or sets none.
func oldestUnflushedWAL(dir string) (num uint64, ok bool) {
	desc, err := pebble.Peek(dir, vfs.Default)
	if err != nil || !desc.Exists {
		return 0, false
	}
	f, err := os.Open(desc.ManifestFilename)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	rr := record.NewReader(f, 0)
	for {
		r, err := rr.Next()
		if err != nil {
			return num, ok // io.EOF, or a torn tail Pebble stops at too
		}
		edit, err := io.ReadAll(r)
		if err != nil {
			return num, ok
		}
		if n, found := editMinUnflushed(edit); found {
			num, ok = n, true
		}
	}
}

// Version edit tags (pebble internal/manifest/version_edit.go). VersionEdit.Encode writes the
// comparator name first when it has one, then the oldest unflushed WAL's number when it is set.
const (
	tagComparator = 1
	tagLogNumber  = 2
)

// editMinUnflushed finds the oldest unflushed WAL's number in one encoded version edit.
func editMinUnflushed(edit []byte) (uint64, bool) {
	tag, n := binary.Uvarint(edit)
	if n <= 0 {
		return 0, false
	}
	edit = edit[n:]
	if tag == tagComparator {
		size, n := binary.Uvarint(edit)
		if n <= 0 || uint64(len(edit)-n) < size {
			return 0, false
		}
		edit = edit[n+int(size):]
		if tag, n = binary.Uvarint(edit); n <= 0 {
			return 0, false
		}
		edit = edit[n:]
	}
	if tag != tagLogNumber {
		return 0, false
	}
	num, n := binary.Uvarint(edit)
	return num, n > 0 && num != 0
}

// checkDamage refuses a directory whose data Pebble would lose or delete on open; with salvage
// it cuts a damaged newest WAL at its damage instead and logs what was dropped.
func checkDamage(dir string, salvage bool, log *slog.Logger) error {
	if err := checkManifest(dir); err != nil {
		return err
	}
	logs, err := replayedWALs(dir)
	if err != nil {
		return err
	}
	for i, path := range logs {
		s, err := scanWAL(path)
		if err != nil {
			return fmt.Errorf("storage: reading %s: %w", path, err)
		}
		if !s.isDamage(i == len(logs)-1) {
			continue // intact, or the torn tail of the newest WAL
		}
		if !salvage {
			return walDamage(path, s)
		}
		if err := salvageWAL(path, s, log); err != nil {
			return err
		}
	}
	return nil
}

func walDamage(path string, s walScan) *DamageError {
	return &DamageError{File: path,
		Detail: fmt.Sprintf("unreadable at byte %d of %d, with %d readable records (%d bytes) after it: the file is damaged, not torn by a crash",
			s.damageAt, s.size, s.recordsAfter, s.bytesAfter),
		Hint: "nothing was changed; restore the directory from a backup, or start with --salvage to drop what follows the damage (the original file is kept)"}
}

// salvageWAL keeps a copy of a damaged WAL and cuts the WAL at its damage, so that Pebble reads
// everything before it and nothing after.
func salvageWAL(path string, s walScan, log *slog.Logger) error {
	keep := path + ".damaged"
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keep, data, 0o600); err != nil {
		return fmt.Errorf("storage: salvage: keeping %s: %w", keep, err)
	}
	if err := os.Truncate(path, s.damageAt); err != nil {
		return fmt.Errorf("storage: salvage: cutting %s: %w", path, err)
	}
	log.Warn("storage: salvaged a damaged WAL: the writes after the damage are dropped",
		"file", path, "damaged_at_byte", s.damageAt, "records_kept", s.records,
		"records_dropped", s.recordsAfter, "bytes_dropped", s.size-s.damageAt, "original", keep)
	return nil
}

// checkManifest refuses a directory that holds Pebble's files but no manifest marker: Pebble
// would take it for a new store and delete the files it does not know.
func checkManifest(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var data []string
	marker := false
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, "marker.manifest."):
			marker = true
		case strings.HasSuffix(name, ".sst"), strings.HasSuffix(name, ".blob"), strings.HasSuffix(name, ".log"),
			strings.HasPrefix(name, "MANIFEST-"):
			data = append(data, name)
		}
	}
	if marker || len(data) == 0 {
		return nil
	}
	return &DamageError{File: filepath.Join(dir, "marker.manifest.*"),
		Detail: fmt.Sprintf("missing, but the directory holds %d data files (%s…): it is not a new store", len(data), data[0]),
		Hint:   "nothing was deleted; restore the marker file (or the directory) from a backup"}
}
