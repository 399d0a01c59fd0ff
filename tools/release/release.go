package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/semver"
)

// options is one run of the release tool.
type options struct {
	root         string     // the repository root (go.work)
	version      string     // empty for a snapshot's default
	snapshot     bool       // commit and tag nothing
	dist         string     // the output directory, relative to root unless absolute
	platforms    []platform // the os/arch pairs to build
	image        bool       // build the container image where docker answers
	checkInstall bool       // go install the binaries from dist/modules outside the workspace
	log          io.Writer
}

// run makes the release (or snapshot) o describes.
func run(o options) error {
	start := time.Now()
	g := git{dir: o.root}
	haveGit := g.works()
	if _, err := os.Stat(filepath.Join(o.root, ".git")); !haveGit && err == nil {
		_, err := g.output("rev-parse", "--is-inside-work-tree")
		return fmt.Errorf("%s is a git repository but git does not answer there (%v): the modules and the commit in fila version need it", o.root, err)
	}
	if o.version == "" {
		if !o.snapshot {
			return errors.New("a release needs -version vX.Y.Z (or -snapshot)")
		}
		o.version = snapshotVersion(g, haveGit)
	}
	if err := checkVersion(o.version); err != nil {
		return err
	}
	mods, err := workspaceModules(o.root)
	if err != nil {
		return err
	}
	if !o.snapshot {
		if err := readyToRelease(g, haveGit, o.version, mods); err != nil {
			return err
		}
	}
	dist := o.dist
	if !filepath.IsAbs(dist) {
		dist = filepath.Join(o.root, dist)
	}
	if err := emptyDist(dist); err != nil {
		return err
	}
	kind := "release"
	if o.snapshot {
		kind = "snapshot"
	}
	fmt.Fprintf(o.log, "fila %s %s into %s\n", kind, o.version, dist)

	clone, err := os.MkdirTemp("", "fila-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(clone)
	src, mtime, goEnv, rel, err := releaseModules(o, g, haveGit, mods, clone, dist)
	if err != nil {
		return err
	}

	archives, err := buildArchives(src, dist, o.version, o.platforms, goEnv, haveGit, mtime, o.log)
	if err != nil {
		return err
	}
	if err := writeChecksums(dist, archives); err != nil {
		return err
	}
	if err := verifyChecksums(dist); err != nil {
		return err
	}
	fmt.Fprintf(o.log, "checksums: %s lists %d archives, each verified\n", filepath.Join(dist, checksumsFile), len(archives))
	if o.checkInstall && haveGit {
		if err := checkInstall(filepath.Join(dist, "modules"), o.version, o.log); err != nil {
			return err
		}
	}
	if o.image {
		commit := ""
		if !o.snapshot {
			commit = rel.release
		}
		if err := buildImage(o.root, o.version, commit, o.snapshot, o.log); err != nil {
			return err
		}
	}
	if !o.snapshot {
		if err := rel.adopt(g, o.log); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.log, "%s %s done in %s\n", kind, o.version, time.Since(start).Round(time.Second))
	return nil
}

// releaseModules publishes every module into dist/modules from a release commit made in clone
// (where git answers) and returns where the binaries are built from, the archives' time, what the
// builds' environment needs, and the release's commits (nil without git).
func releaseModules(o options, g git, haveGit bool, mods []module, clone, dist string) (src string, mtime time.Time, goEnv []string, rel *commits, err error) {
	src, mtime = o.root, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if !haveGit {
		fmt.Fprintln(o.log, "modules: skipped, git does not answer here (a snapshot of an exported tree)")
		return src, mtime, nil, nil, nil
	}
	if rel, err = prepareModules(g, clone, o.version, mods, !o.snapshot); err != nil {
		return
	}
	mtime = rel.time
	if err = publishModules(rel.git, rel.release, o.version, rel.time, mods, filepath.Join(dist, "modules")); err != nil {
		return
	}
	fmt.Fprintf(o.log, "modules: %d published into %s, each requiring the others at %s, no replace lines\n",
		len(mods), filepath.Join(dist, "modules"), o.version)
	if o.snapshot {
		return src, mtime, nil, rel, nil
	}
	if err = rel.git.run(nil, "checkout", "--quiet", "--detach", rel.release); err != nil {
		return
	}
	work, err := releaseWorkspace(clone, o.version, mods)
	if err != nil {
		return
	}
	// the binaries are built from the tagged commit
	return clone, mtime, []string{"GOWORK=" + work}, rel, nil
}

// checkVersion accepts a canonical semantic version below v2 (a v2 module would need a /v2
// module path).
func checkVersion(v string) error {
	if !semver.IsValid(v) || semver.Canonical(v) != v {
		return fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH or vMAJOR.MINOR.PATCH-PRERELEASE, such as v0.3.0 or v1.0.0-rc.1", v)
	}
	if m := semver.Major(v); m != "v0" && m != "v1" {
		return fmt.Errorf("version %s: a major version above v1 needs module paths ending in /%s; the modules here have none", v, m)
	}
	return nil
}

// snapshotVersion is v0.0.0-snapshot-<short commit>, or v0.0.0-snapshot without git.
func snapshotVersion(g git, haveGit bool) string {
	if haveGit {
		if short, err := g.output("rev-parse", "--short=12", "HEAD"); err == nil {
			return "v0.0.0-snapshot-" + short
		}
	}
	return "v0.0.0-snapshot"
}

// readyToRelease refuses a release from a tree that is not committed or whose tags exist.
func readyToRelease(g git, haveGit bool, version string, mods []module) error {
	if !haveGit {
		return errors.New("a release needs git: it commits and tags the modules")
	}
	status, err := g.output("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return err
	}
	if status != "" {
		return fmt.Errorf("the working tree has uncommitted changes; a release is made from a commit:\n%s", status)
	}
	if _, err := g.output("symbolic-ref", "--quiet", "HEAD"); err != nil {
		return errors.New("HEAD is detached: check out the branch the release commits go on")
	}
	for _, m := range mods {
		if _, err := g.output("rev-parse", "--verify", "--quiet", "refs/tags/"+m.tag(version)); err == nil {
			return fmt.Errorf("tag %s exists already: a version is released once", m.tag(version))
		}
	}
	return nil
}

// emptyDist makes dir an empty directory holding only the marker that says a release made it,
// refusing a directory that holds anything without that marker.
func emptyDist(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, distMarker)); err != nil {
			return fmt.Errorf("%s holds files but no %s, so it is not a release's output: not emptying it", dir, distMarker)
		}
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, distMarker), []byte("made by tools/release: emptied by its next run\n"), 0o644)
}

// distMarker marks an output directory the release tool may empty.
const distMarker = ".fila-release"

// platform is one os/arch pair.
type platform struct{ os, arch string }

func (p platform) String() string { return p.os + "/" + p.arch }

var defaultPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

func parsePlatforms(s string) ([]platform, error) {
	var out []platform
	for _, f := range strings.Split(s, ",") {
		goos, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || goos == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q: want os/arch, such as linux/amd64", f)
		}
		out = append(out, platform{goos, arch})
	}
	return out, nil
}
