package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

// CheckReport is what Check found in a data directory.
type CheckReport struct {
	Dir    string
	WALs   int   // WAL files read
	Keys   int64 // keys read, every value with them
	Bytes  int64 // bytes of keys and values read
	Format uint32
	// Problems lists every damage found, each naming its file; empty when the directory is sound.
	Problems []string
}

// Check verifies a data directory offline, changing nothing: the manifest marker, every WAL that
// a start replays, chunk by chunk (as a start does), then every key and value through a read-only
// Pebble, which verifies each block's checksum, and the store format marker. An error means the
// check could not run (an *InUseError when a server has the directory open); damage is reported
// in Problems.
func Check(dir string) (CheckReport, error) {
	rep := CheckReport{Dir: dir}
	if _, err := os.Stat(dir); err != nil {
		return rep, err
	}
	if err := CheckNotInUse(dir); err != nil {
		return rep, err // its WAL is being written: what a check reads there would be no verdict
	}
	if err := checkManifest(dir); err != nil {
		rep.Problems = append(rep.Problems, err.Error())
		return rep, nil // Pebble would take the directory for a new store
	}
	logs, err := replayedWALs(dir)
	if err != nil {
		return rep, err
	}
	for i, path := range logs {
		s, err := scanWAL(path)
		if err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		rep.WALs++
		if s.isDamage(i == len(logs)-1) {
			rep.Problems = append(rep.Problems, walDamage(path, s).Error())
		}
	}
	if len(rep.Problems) > 0 {
		return rep, nil // opening would drop what follows the damage
	}
	var logged []string
	po := &pebble.Options{ReadOnly: true,
		Logger: checkLogger{&logged},
		EventListener: &pebble.EventListener{DataCorruption: func(info pebble.DataCorruptionInfo) {
			logged = append(logged, fmt.Sprintf("%s: %v", info.Path, info.Details))
		}}}
	p, err := openPebble(dir, po, true)
	if err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("opening %s: %v", dir, err))
		return rep, nil
	}
	defer closePebble(p)
	if err := rep.readAll(p); err != nil {
		rep.Problems = append(rep.Problems, err.Error())
	}
	rep.Problems = append(rep.Problems, logged...)
	return rep, nil
}

// readAll reads every key and value of p.
func (rep *CheckReport) readAll(p *pebble.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading: pebble: %v", panicText(r))
		}
	}()
	it, err := p.NewIter(nil)
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		val, verr := it.ValueAndErr()
		if verr != nil {
			it.Close()
			return fmt.Errorf("reading the value of key %q: %w", it.Key(), verr)
		}
		rep.Keys++
		rep.Bytes += int64(len(it.Key()) + len(val))
		if len(it.Key()) == 1 && it.Key()[0] == kindFormat && len(val) == 4 {
			rep.Format = binary.BigEndian.Uint32(val)
		}
	}
	err = errors.Join(it.Error(), it.Close())
	if err == nil && rep.Keys > 0 && rep.Format != FormatVersion {
		err = &FormatError{Dir: rep.Dir, Version: max(rep.Format, 1)}
	}
	return err
}

// WriteTo prints the report for an operator.
func (rep CheckReport) WriteTo(w io.Writer) (int64, error) {
	n, err := fmt.Fprintf(w, "%s: %d WAL files, %d keys (%d bytes) read, store format %d\n", rep.Dir, rep.WALs, rep.Keys, rep.Bytes, rep.Format)
	total := int64(n)
	for _, p := range rep.Problems {
		n, err = fmt.Fprintln(w, "DAMAGED:", p)
		total += int64(n)
	}
	if len(rep.Problems) == 0 {
		n, err = fmt.Fprintln(w, "ok: no damage found")
		total += int64(n)
	}
	return total, err
}

// checkLogger keeps Pebble's error logs of a check.
type checkLogger struct{ errs *[]string }

func (checkLogger) Infof(string, ...any) {}
func (l checkLogger) Errorf(format string, args ...any) {
	*l.errs = append(*l.errs, fmt.Sprintf(format, args...))
}
func (l checkLogger) Fatalf(format string, args ...any) {
	panic(fatalPanic{msg: fmt.Sprintf(format, args...)})
}
