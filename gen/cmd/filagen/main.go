// Command filagen generates a protocol's Go codecs from its YAML description: gen/spec loads it,
// gen/check judges it, gen/emit renders it.
//
//	filagen -spec ../spec/fibp.yaml -out fibp          write the files
//	filagen -spec ../spec/fibp.yaml -out fibp -check   fail when the files on disk are stale
//	filagen -spec ../spec/rift.yaml -out riftproto -package riftproto
//
// The Go package is named after the spec's protocol unless -package names it.
//
// It writes only files named *.gen.go and *_gen_test.go, and removes those it no longer emits;
// hand-written files beside them are left alone.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"sort"

	"github.com/filamq/fila/gen/check"
	"github.com/filamq/fila/gen/emit"
	"github.com/filamq/fila/gen/spec"
)

func main() {
	specPath := flag.String("spec", "", "protocol spec (YAML)")
	outDir := flag.String("out", "", "output package folder")
	source := flag.String("source", "", "spec path to name in generated headers (default: -spec as given)")
	checkOnly := flag.Bool("check", os.Getenv("FILAGEN_CHECK") != "", "report stale or missing files instead of writing them (also when FILAGEN_CHECK is set, as make check-generated does)")
	pkg := flag.String("package", "", "Go package name of the output (default: the spec's protocol)")
	flag.Parse()
	if *specPath == "" || *outDir == "" {
		fmt.Fprintln(os.Stderr, "usage: filagen -spec FILE.yaml -out DIR [-package NAME] [-check]")
		os.Exit(2)
	}
	if *source == "" {
		*source = *specPath
	}
	if *pkg != "" && !token.IsIdentifier(*pkg) {
		fmt.Fprintf(os.Stderr, "filagen: -package %q is not a Go identifier\n", *pkg)
		os.Exit(2)
	}
	stale, err := run(*specPath, *outDir, *source, *pkg, *checkOnly)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *checkOnly && len(stale) > 0 {
		for _, s := range stale {
			fmt.Fprintf(os.Stderr, "filagen: %s is stale; run make generate\n", s)
		}
		os.Exit(1)
	}
}

// run generates the package and returns the files that differ from what is on disk.
// A non-empty pkg names the Go package instead of the spec's protocol.
func run(specPath, outDir, source, pkg string, checkOnly bool) ([]string, error) {
	s, err := spec.Load(specPath)
	if err != nil {
		return nil, err
	}
	if pkg != "" {
		s.Protocol = pkg
	}
	if errs := check.Check(s); errs != nil {
		return nil, errs
	}
	files, err := emit.Files(s, source)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	var stale []string
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		path := filepath.Join(outDir, name)
		old, err := os.ReadFile(path)
		if err == nil && bytes.Equal(old, files[name]) {
			continue
		}
		stale = append(stale, path)
		if !checkOnly {
			if err := writeAtomic(path, files[name]); err != nil {
				return nil, err
			}
		}
	}
	entries, err := os.ReadDir(outDir)
	if err != nil {
		return nil, err
	}
	for _, ent := range entries {
		if _, ours := files[ent.Name()]; ours || !emit.Generated(ent.Name()) {
			continue
		}
		path := filepath.Join(outDir, ent.Name())
		stale = append(stale, path)
		if !checkOnly {
			if err := os.Remove(path); err != nil {
				return nil, err
			}
		}
	}
	return stale, nil
}

// writeAtomic replaces the file at path with data so that a reader (or an interrupted run) sees
// either the old file or the new one, never a torn write: the bytes go to a temporary file in the
// same folder, which is then renamed over path.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
