package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// binaries are the commands a release ships, by package; each archive holds them and docs.
var binaries = []struct{ name, pkg string }{
	{"fila-server", "./server/cmd/fila-server"},
	{"fila", "./client/cmd/fila"},
}

// docs are the repository files each archive carries beside the binaries.
var docs = []string{"LICENSE", "README.md"}

// versionSymbols are the variables the version is stamped into (-X), one per buildinfo copy.
var versionSymbols = []string{
	"github.com/filamq/fila/server/internal/buildinfo.version",
	"github.com/filamq/fila/client/internal/buildinfo.version",
}

const checksumsFile = "checksums.txt"

// archiveName is fila_<version without the v>_<os>_<arch>, goreleaser's convention; the
// archive is that with .tar.gz, and its files are in a directory of that name.
func archiveName(version string, p platform) string {
	return fmt.Sprintf("fila_%s_%s_%s", strings.TrimPrefix(version, "v"), p.os, p.arch)
}

// buildArchives builds the binaries for each platform from src and writes one archive each into
// dist, its entries dated mtime (the commit's time: the same commit gives the same archive
// bytes). It returns the archives' file names.
func buildArchives(src, dist, version string, platforms []platform, env []string, vcs bool, mtime time.Time, log io.Writer) ([]string, error) {
	work, err := os.MkdirTemp("", "fila-release-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	var names []string
	for _, p := range platforms {
		start := time.Now()
		out := filepath.Join(work, p.os+"_"+p.arch)
		if err := build(src, out, version, p, env, vcs); err != nil {
			return nil, err
		}
		name := archiveName(version, p) + ".tar.gz"
		if err := writeArchive(filepath.Join(dist, name), archiveName(version, p), src, out, mtime); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(log, "built %s in %s\n", name, time.Since(start).Round(100*time.Millisecond))
		names = append(names, name)
	}
	return names, nil
}

// build compiles the binaries for p into out: static (CGO_ENABLED=0), without the build
// machine's paths (-trimpath), without the symbol table and DWARF (-s -w: a third smaller; panics
// still print their stack traces), the version stamped, env added to the environment. vcs says
// whether git can stamp the commit (fila version prints it).
func build(src, out, version string, p platform, env []string, vcs bool) error {
	ldflags := "-s -w"
	for _, sym := range versionSymbols {
		ldflags += " -X " + sym + "=" + version
	}
	args := []string{"build", "-trimpath", fmt.Sprintf("-buildvcs=%t", vcs), "-ldflags=" + ldflags, "-o", out + string(filepath.Separator)}
	for _, b := range binaries {
		args = append(args, b.pkg)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = src
	cmd.Env = append(append(os.Environ(), env...), "CGO_ENABLED=0", "GOOS="+p.os, "GOARCH="+p.arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("GOOS=%s GOARCH=%s go %s: %v\n%s", p.os, p.arch, strings.Join(args, " "), err, b)
	}
	return nil
}

// writeArchive writes a gzipped tar of the binaries in bin and the docs in src, under dir/,
// owned by root, dated mtime.
func writeArchive(path, dir, src, bin string, mtime time.Time) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	zw, err := gzip.NewWriterLevel(f, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	add := func(name, from string, mode int64) error {
		data, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: dir + "/" + name, Mode: mode, Size: int64(len(data)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Mode: 0o755, ModTime: mtime, Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
		return err
	}
	for _, b := range binaries {
		if err := add(b.name, filepath.Join(bin, b.name), 0o755); err != nil {
			return err
		}
	}
	for _, d := range docs {
		if err := add(d, filepath.Join(src, d), 0o644); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// writeChecksums writes checksums.txt in sha256sum's format (`sha256sum -c checksums.txt`
// checks it), one line per file, sorted by name.
func writeChecksums(dist string, names []string) error {
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		sum, err := sha256File(filepath.Join(dist, name))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, name)
	}
	return os.WriteFile(filepath.Join(dist, checksumsFile), []byte(b.String()), 0o644)
}

// verifyChecksums reads checksums.txt back and checks every file it lists, as sha256sum -c does.
func verifyChecksums(dist string) error {
	f, err := os.Open(filepath.Join(dist, checksumsFile))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		want, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(want) != sha256.Size*2 || name == "" {
			return fmt.Errorf("%s: line %q is not \"<sha256>  <file>\"", checksumsFile, sc.Text())
		}
		got, err := sha256File(filepath.Join(dist, name))
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%s: %s has SHA-256 %s, the file lists %s", checksumsFile, name, got, want)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s lists no file", checksumsFile)
	}
	return nil
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
