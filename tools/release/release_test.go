package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/filamq/fila/tools/internal/repo"
)

var host = platform{runtime.GOOS, runtime.GOARCH}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Skip(err)
	}
	if !(git{dir: root}).works() {
		t.Skip("git does not answer in " + root)
	}
	return root
}

// A snapshot for the host: one archive holding the two binaries, LICENSE and README.md; a
// checksums.txt whose line is the archive's SHA-256; binaries that print the version given; the
// modules published with the client requiring generated at that version and no replace lines.
func TestSnapshotForTheHost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fila and fila-server")
	}
	root := repoRoot(t)
	const version = "v0.0.0-test.1"
	dist := t.TempDir()
	var log bytes.Buffer
	err := run(options{root: root, version: version, snapshot: true, dist: dist, platforms: []platform{host}, log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	name := fmt.Sprintf("fila_0.0.0-test.1_%s_%s", host.os, host.arch)
	archive, err := os.ReadFile(filepath.Join(dist, name+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(archive)
	if sums, _ := os.ReadFile(filepath.Join(dist, checksumsFile)); string(sums) != hex.EncodeToString(sum[:])+"  "+name+".tar.gz\n" {
		t.Errorf("%s:\n%s\nwant the archive's SHA-256 %x", checksumsFile, sums, sum)
	}

	bin := t.TempDir()
	files := untar(t, archive, bin)
	want := []string{name + "/", name + "/LICENSE", name + "/README.md", name + "/fila", name + "/fila-server"}
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Errorf("the archive holds %q, want %q", files, want)
	}
	for _, c := range [][]string{{"fila-server", "--version"}, {"fila", "version"}} {
		out, err := exec.Command(filepath.Join(bin, name, c[0]), c[1]).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), c[0]+" "+version+" (commit ") {
			t.Errorf("%s %s: %v: %q, want %q…", c[0], c[1], err, out, c[0]+" "+version+" (commit ")
		}
	}

	goMod, err := os.ReadFile(filepath.Join(dist, "modules/github.com/filamq/fila/client/@v", version+".mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("client/go.mod", goMod, nil)
	if err != nil {
		t.Fatal(err)
	}
	requires := map[string]string{}
	for _, r := range f.Require {
		requires[r.Mod.Path] = r.Mod.Version
	}
	if len(f.Replace) > 0 || requires["github.com/filamq/fila/generated"] != version {
		t.Errorf("the published client go.mod has replace lines or does not require generated %s:\n%s", version, goMod)
	}
	for _, zip := range []string{"github.com/filamq/fila/@v", "github.com/filamq/fila/generated/@v", "github.com/filamq/fila/server/@v"} {
		if _, err := os.Stat(filepath.Join(dist, "modules", zip, version+".zip")); err != nil {
			t.Error(err)
		}
	}
}

// A release in a clone of the repository: the release commit (go.mod files in their published
// form) is tagged for every module as Go names nested modules' versions, the branch moves on to
// a commit with the replace lines back, the binaries carry the version and the tagged commit, a
// user outside the repository fetches the SDK from the tags with go get (checkGoGetFromTags),
// and the same version is not released twice.
func TestReleaseTagsEveryModule(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and builds fila and fila-server")
	}
	root := repoRoot(t)
	clone := filepath.Join(t.TempDir(), "fila")
	if err := (git{dir: root}).run(nil, "clone", "--quiet", "--shared", root, clone); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"GIT_AUTHOR_NAME", "release test"}, {"GIT_AUTHOR_EMAIL", "release-test@invalid"},
		{"GIT_COMMITTER_NAME", "release test"}, {"GIT_COMMITTER_EMAIL", "release-test@invalid"}} {
		t.Setenv(kv[0], kv[1])
	}
	g := git{dir: clone}
	head, _ := g.output("rev-parse", "HEAD")
	const version = "v0.9.0"
	dist := t.TempDir()
	var log bytes.Buffer
	o := options{root: clone, version: version, dist: dist, platforms: []platform{host}, log: &log}
	if err := run(o); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}

	release, _ := g.output("rev-parse", "HEAD~1")
	if parent, _ := g.output("rev-parse", "HEAD~2"); parent != head {
		t.Fatalf("the branch is not HEAD, then the release commit, then the development one:\n%s", log.String())
	}
	mods, err := workspaceModules(clone)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, m := range mods {
		tags = append(tags, m.tag(version))
		if at, err := g.output("rev-parse", m.tag(version)+"^{commit}"); err != nil || at != release {
			t.Errorf("tag %s: %v, at %s, want the release commit %s", m.tag(version), err, at, release)
		}
		replaces := func(rev string) ([]*modfile.Replace, []*modfile.Require) {
			data, err := g.bytes("show", rev+":"+m.goMod())
			if err != nil {
				t.Fatal(err)
			}
			f, err := modfile.Parse(m.goMod(), data, nil)
			if err != nil {
				t.Fatal(err)
			}
			return f.Replace, f.Require
		}
		before, _ := replaces(head)
		for rev, want := range map[string]int{release: 0, "HEAD": len(before)} {
			got, requires := replaces(rev)
			if len(got) != want {
				t.Errorf("%s at %s has %d replace lines, want %d", m.goMod(), rev, len(got), want)
			}
			for _, r := range requires {
				if strings.HasPrefix(r.Mod.Path, "github.com/filamq/fila/") && r.Mod.Version != version {
					t.Errorf("%s at %s requires %s %s, want %s", m.goMod(), rev, r.Mod.Path, r.Mod.Version, version)
				}
			}
		}
	}
	sort.Strings(tags)
	if want := "client/v0.9.0 examples/v0.9.0 fuzz/v0.9.0 generated/v0.9.0 lua/v0.9.0 server/v0.9.0 tools/compare/v0.9.0 tools/v0.9.0 v0.9.0"; strings.Join(tags, " ") != want {
		t.Errorf("tags %s, want %s", strings.Join(tags, " "), want)
	}

	archive, err := os.ReadFile(filepath.Join(dist, archiveName(version, host)+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	untar(t, archive, bin)
	out, err := exec.Command(filepath.Join(bin, archiveName(version, host), "fila"), "version").CombinedOutput()
	if want := "fila " + version + " (commit " + release + ","; err != nil || !strings.HasPrefix(string(out), want) {
		t.Errorf("fila version: %v: %q, want %q… (the tagged commit, unmodified)", err, out, want)
	}

	// The tags are what a user's go get reads (through the public proxy, which reads them).
	checkGoGetFromTags(t, clone, version)

	log.Reset()
	if err := run(o); err == nil || !strings.Contains(err.Error(), "tag v0.9.0 exists already") {
		t.Errorf("releasing v0.9.0 again: %v, want a refusal naming the tag", err)
	}
}

func TestRefusals(t *testing.T) {
	for _, v := range []string{"1.2.3", "v1.2", "v2.0.0", "v1.2.3+build", "v01.2.3"} {
		if err := checkVersion(v); err == nil {
			t.Errorf("checkVersion(%q) accepted it", v)
		}
	}
	for _, v := range []string{"v0.3.0", "v1.0.0-rc.1", "v0.0.0-snapshot-abc123"} {
		if err := checkVersion(v); err != nil {
			t.Errorf("checkVersion(%q): %v", v, err)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := emptyDist(dir); err == nil {
		t.Error("emptyDist emptied a directory that is not a release's output")
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Error(err)
	}
	for _, p := range []string{"linux", "linux/", "/amd64", "linux/amd64/v2"} {
		if _, err := parsePlatforms(p); err == nil {
			t.Errorf("parsePlatforms(%q) accepted it", p)
		}
	}
}

// untar extracts the gzipped tar data into dir and returns its entries' names in order.
func untar(t *testing.T, data []byte, dir string) []string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		path := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, body, os.FileMode(hdr.Mode)); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(names)
	return names
}
