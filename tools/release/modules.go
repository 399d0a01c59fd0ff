package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	gomodule "golang.org/x/mod/module"
	"golang.org/x/mod/zip"

	"github.com/filamq/fila/tools/modproxy"
)

// module is one workspace module: its path and its directory (slash-separated, relative to the
// repository root, "." for the root module).
type module struct{ path, dir string }

// tag is the module's tag for version: Go names a nested module's versions by its directory
// (client/v1.2.3), the root module's plainly (v1.2.3).
func (m module) tag(version string) string {
	if m.dir == "." {
		return version
	}
	return m.dir + "/" + version
}

func (m module) goMod() string { return path.Join(m.dir, "go.mod") }

// workspaceModules lists the modules go.work uses. Each nested module's path must be the root
// module's path and its directory, or its tags would not name it.
func workspaceModules(root string) ([]module, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	var mods []module
	rootPath := ""
	for _, u := range wf.Use {
		dir := path.Clean(filepath.ToSlash(u.Path))
		data, err := os.ReadFile(filepath.Join(root, dir, "go.mod"))
		if err != nil {
			return nil, err
		}
		m := module{path: modfile.ModulePath(data), dir: dir}
		if dir == "." {
			rootPath = m.path
		}
		mods = append(mods, m)
	}
	if rootPath == "" {
		return nil, errors.New("go.work does not use the root module (.)")
	}
	for _, m := range mods {
		if m.dir != "." && m.path != rootPath+"/"+m.dir {
			return nil, fmt.Errorf("module %s in %s: a module tagged %s must have the path %s/%s", m.path, m.dir, m.tag("vX.Y.Z"), rootPath, m.dir)
		}
	}
	return mods, nil
}

// commits are the release's commits, made in a clone of the repository.
type commits struct {
	git     git       // the clone
	release string    // the commit whose go.mod files are in their published form
	dev     string    // after it, the replace lines back (a release only)
	tags    []string  // on release (a release only)
	time    time.Time // the release commit's time
}

// prepareModules clones the repository into clone (sharing its objects; the repository itself
// is not written to) and makes the release commit on HEAD there; for a release (tag), the
// development commit after it and the tags too. A snapshot's commit takes HEAD's time, so the
// same HEAD gives the same commit and module zips.
func prepareModules(src git, clone, version string, mods []module, tag bool) (*commits, error) {
	if err := src.run(nil, "clone", "--quiet", "--shared", "--no-checkout", src.dir, clone); err != nil {
		return nil, err
	}
	c := git{dir: clone}
	head, err := c.output("rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	at := time.Now().UTC().Truncate(time.Second)
	if !tag {
		sec, err := c.output("log", "-1", "--format=%ct", head)
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseInt(sec, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("commit time %q: %w", sec, err)
		}
		at = time.Unix(n, 0).UTC()
		if _, err := c.output("var", "GIT_COMMITTER_IDENT"); err != nil { // no identity configured
			c = c.with("GIT_AUTHOR_NAME=fila release", "GIT_AUTHOR_EMAIL=release@invalid",
				"GIT_COMMITTER_NAME=fila release", "GIT_COMMITTER_EMAIL=release@invalid")
		}
	}
	date := strconv.FormatInt(at.Unix(), 10) + " +0000"
	c = c.with("GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date)

	published := map[string]bool{}
	for _, m := range mods {
		published[m.path] = true
	}
	releaseMods, devMods := map[string][]byte{}, map[string][]byte{}
	for _, m := range mods {
		data, err := c.bytes("show", head+":"+m.goMod())
		if err != nil {
			return nil, err
		}
		if releaseMods[m.goMod()], err = modproxy.ReleaseGoMod(m.goMod(), data, version, published); err != nil {
			return nil, err
		}
		if devMods[m.goMod()], err = devGoMod(m.goMod(), data, version, published); err != nil {
			return nil, err
		}
	}
	rel := &commits{git: c, time: at}
	rel.release, err = commitFiles(c, head, releaseMods,
		"release "+version+": the modules require each other at "+version+", without replace lines")
	if err != nil || !tag {
		return rel, err
	}
	rel.dev, err = commitFiles(c, rel.release, devMods,
		"after "+version+": the go.mod files' replace lines back, for work inside the repository")
	if err != nil {
		return nil, err
	}
	for _, m := range mods {
		t := m.tag(version)
		if err := c.run(nil, "tag", "-a", "-m", "fila "+version+" ("+m.path+")", t, rel.release); err != nil {
			return nil, err
		}
		rel.tags = append(rel.tags, t)
	}
	return rel, c.run(nil, "update-ref", "refs/heads/fila-release", rel.dev)
}

// devGoMod is a go.mod as the development commit after a release has it: the requirements on
// published modules at version, the replace lines kept.
func devGoMod(name string, data []byte, version string, published map[string]bool) ([]byte, error) {
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil, err
	}
	for _, r := range f.Require {
		if published[r.Mod.Path] {
			if err := f.AddRequire(r.Mod.Path, version); err != nil {
				return nil, err
			}
		}
	}
	f.Cleanup()
	return f.Format()
}

// commitFiles commits parent's tree with files (path to content) replaced, using an index of
// its own (the clone's working tree and index are not touched), and returns the commit.
func commitFiles(c git, parent string, files map[string][]byte, msg string) (string, error) {
	ci := c.with("GIT_INDEX_FILE=" + filepath.Join(c.dir, ".git", "release-index"))
	if err := ci.run(nil, "read-tree", parent); err != nil {
		return "", err
	}
	for name, data := range files {
		blob, err := ci.outputIn(data, "hash-object", "-w", "--stdin")
		if err != nil {
			return "", err
		}
		if err := ci.run(nil, "update-index", "--cacheinfo", "100644,"+blob+","+name); err != nil {
			return "", err
		}
	}
	tree, err := ci.output("write-tree")
	if err != nil {
		return "", err
	}
	return ci.output("commit-tree", tree, "-p", parent, "-m", msg)
}

// publishModules writes every module at rev into out, a file-based module proxy
// (GOPROXY=file://out): the zip the go command would make of the tag (zip.CreateFromVCS), the
// go.mod, the .info and the list. It then checks every published go.mod: no replace lines, and
// every requirement on a module of the release at version.
func publishModules(c git, rev, version string, at time.Time, mods []module, out string) error {
	published := map[string]bool{}
	for _, m := range mods {
		published[m.path] = true
	}
	for _, m := range mods {
		esc, err := gomodule.EscapePath(m.path)
		if err != nil {
			return err
		}
		dir := filepath.Join(out, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		goMod, err := c.bytes("show", rev+":"+m.goMod())
		if err != nil {
			return err
		}
		if err := checkPublishedGoMod(m, goMod, version, published); err != nil {
			return err
		}
		subdir := ""
		if m.dir != "." {
			subdir = m.dir
		}
		if err := writeZip(filepath.Join(dir, version+".zip"), m.path, version, c.dir, rev, subdir); err != nil {
			return fmt.Errorf("module %s: %w", m.path, err)
		}
		info, _ := json.Marshal(struct {
			Version string
			Time    time.Time
		}{version, at})
		for name, data := range map[string][]byte{version + ".mod": goMod, version + ".info": info, "list": []byte(version + "\n")} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeZip(name, modPath, version, repoDir, rev, subdir string) (err error) {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return zip.CreateFromVCS(f, gomodule.Version{Path: modPath, Version: version}, repoDir, rev, subdir)
}

// checkPublishedGoMod refuses a go.mod a user could not build against: a replace line (go
// install pkg@version refuses it; go get ignores it, so the module would build differently
// outside the repository), or a requirement on another module of the release at another version.
func checkPublishedGoMod(m module, goMod []byte, version string, published map[string]bool) error {
	f, err := modfile.Parse(m.goMod(), goMod, nil)
	if err != nil {
		return err
	}
	if len(f.Replace) > 0 {
		return fmt.Errorf("%s as published keeps replace %s", m.goMod(), f.Replace[0].Old.Path)
	}
	for _, r := range f.Require {
		if published[r.Mod.Path] && r.Mod.Version != version {
			return fmt.Errorf("%s as published requires %s %s, not %s", m.goMod(), r.Mod.Path, r.Mod.Version, version)
		}
	}
	return nil
}

// adopt brings the release's commits and tags into the repository g: its branch moves forward to
// the development commit (the release commit before it), the tags are created. It prints the
// command that publishes them.
func (rel *commits) adopt(g git, log io.Writer) error {
	refs := []string{"refs/heads/fila-release:refs/fila-release/dev"}
	for _, t := range rel.tags {
		refs = append(refs, "refs/tags/"+t+":refs/tags/"+t)
	}
	if err := g.run(nil, append([]string{"fetch", "--quiet", "--no-tags", rel.git.dir}, refs...)...); err != nil {
		return err
	}
	if err := g.run(nil, "merge", "--quiet", "--ff-only", "refs/fila-release/dev"); err != nil {
		return err
	}
	if err := g.run(nil, "update-ref", "-d", "refs/fila-release/dev"); err != nil {
		return err
	}
	branch, err := g.output("symbolic-ref", "--short", "HEAD")
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "committed %s (release, tagged) and %s (development) on %s; tagged %s\n",
		rel.release[:12], rel.dev[:12], branch, strings.Join(rel.tags, " "))
	fmt.Fprintf(log, "publish with:\n\tgit push --atomic origin %s %s\n", branch, strings.Join(rel.tags, " "))
	return nil
}

// releaseWorkspace writes a go.work for building dir (a checkout of the release commit)
// it before the release is published: the checkout's modules, and each replaced at version by its
// directory. Inside the workspace a requirement on a workspace module at a version still needs
// that version's go.mod (the development go.mod files' replace lines provide it; the release's
// have none), which no proxy has yet. The file is outside the checkout's tree, so the build
// stamps the tagged commit unmodified.
func releaseWorkspace(dir, version string, mods []module) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.work"))
	if err != nil {
		return "", err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if wf.Go != nil {
		fmt.Fprintf(&b, "go %s\n\n", wf.Go.Version)
	}
	b.WriteString("use (\n")
	for _, m := range mods {
		fmt.Fprintf(&b, "\t%s\n", filepath.Join(dir, filepath.FromSlash(m.dir)))
	}
	b.WriteString(")\n\n")
	for _, m := range mods {
		fmt.Fprintf(&b, "replace %s %s => %s\n", m.path, version, filepath.Join(dir, filepath.FromSlash(m.dir)))
	}
	work := filepath.Join(dir, ".git", "release.go.work") // git ignores its own directory
	if err := os.WriteFile(work, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.work.sum"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	return work, os.WriteFile(work+".sum", sum, 0o644)
}
