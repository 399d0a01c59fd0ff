package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/filamq/fila/server/storage"
)

// riftDirName is the directory of Rift's durable streams in a data directory (and a backup).
const riftDirName = "rift"

// restore is `fila-server restore --from BACKUP --data-dir DIR`: it copies a backup (written by
// POST /api/v1/backup) into DIR, which must not exist or be empty, and verifies the copy as
// `fila-server check` does before it becomes DIR. The copy is made beside DIR (DIR.restoring)
// and renamed into place once complete and verified, so a restore cut short leaves no data
// directory a server would start on. The backup is not changed: it can be restored again.
// Exit status: 0 restored, 1 failed, 2 unusable arguments.
func restore(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("fila-server restore", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the backup's directory, as POST /api/v1/backup (fila backup create) answered it (required)")
	dir := fs.String("data-dir", "", "the data directory to create: it must not exist, or be empty (required)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fila-server restore --from BACKUP --data-dir DIR")
		fmt.Fprintln(stderr, "  copies a backup into a new data directory and verifies it; then start fila-server with --data-dir DIR")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *from == "" || *dir == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	m, err := restoreInto(*from, *dir)
	if err != nil {
		fmt.Fprintln(stderr, "fila-server restore:", err)
		return 1
	}
	files, bytes, _ := treeSize(*dir)
	fmt.Fprintf(stdout, "restored %s (taken %s by %s) into %s: %d files, %d bytes; start the server with --data-dir %s\n",
		*from, m.Created.Format("2006-01-02T15:04:05Z07:00"), m.Server, *dir, files, bytes, *dir)
	return 0
}

// restoreInto copies the backup from into dir (see restore).
func restoreInto(from, dir string) (manifest, error) {
	m, err := readManifest(from)
	if err != nil {
		return m, err
	}
	if err := emptyOrAbsent(dir); err != nil {
		return m, err
	}
	staging := filepath.Clean(dir) + ".restoring"
	if err := os.RemoveAll(staging); err != nil { // left by a restore cut short
		return m, err
	}
	err = copyTree(from, staging)
	if err == nil {
		err = verify(staging)
	}
	if err == nil {
		err = os.Rename(staging, dir) // over an empty directory too
	}
	if err == nil {
		err = syncPath(filepath.Dir(filepath.Clean(dir)))
	}
	if err != nil {
		os.RemoveAll(staging)
		return m, err
	}
	return m, nil
}

// readManifest reads a backup's manifest and refuses a backup this server cannot start on.
func readManifest(from string) (manifest, error) {
	var m manifest
	data, err := os.ReadFile(filepath.Join(from, backupManifest))
	if errors.Is(err, fs.ErrNotExist) {
		return m, fmt.Errorf("%s is not a complete backup: it has no %s (a backup being written, or cut short, is named *.partial)",
			from, backupManifest)
	}
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(from, backupManifest), err)
	}
	if m.Format != backupFormat {
		return m, fmt.Errorf("%s is a backup of layout %d, written by %s; this release restores layout %d", from, m.Format, m.Server, backupFormat)
	}
	if m.StoreFormat != storage.FormatVersion {
		return m, fmt.Errorf("%s (written by %s): %w", from, m.Server, &storage.FormatError{Dir: from, Version: m.StoreFormat})
	}
	return m, nil
}

// emptyOrAbsent refuses a dir that holds anything.
func emptyOrAbsent(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s is not empty: restore into a new directory (or move this one away first)", dir)
	}
	return nil
}

// verify checks the copied store as fila-server check does.
func verify(dir string) error {
	rep, err := storage.Check(dir)
	if err != nil {
		return err
	}
	if len(rep.Problems) > 0 {
		return fmt.Errorf("the copy does not verify (fila-server check --data-dir on the backup says more): %v", rep.Problems)
	}
	return nil
}

// copyTree copies every file of the backup src into dst (which must not exist) but its
// manifest, synced. Nothing is linked: the server recycles its WAL files by overwriting them,
// which would change the backup's.
func copyTree(src, dst string) error {
	var dirs []string
	err := filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case e.IsDir():
			dirs = append(dirs, to)
			return os.Mkdir(to, 0o755)
		case rel == backupManifest || e.Name() == "LOCK":
			return nil // the LOCK files a check of the backup made
		case !e.Type().IsRegular():
			return fmt.Errorf("%s: not a regular file", path)
		}
		return storage.CopyFile(path, to)
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syncPath(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}
