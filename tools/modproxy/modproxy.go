// Package modproxy publishes modules of this repository into a file-based Go module proxy
// (GOPROXY=file://DIR), as a release would: every module at one version, its requirements on the
// other published modules set to that version, and the replace directives that point into the
// repository dropped. A program in its own module can then require the SDK like any module,
// without replace lines and without the network (TestOutsideModuleBuildsAgainstTheSDK).
package modproxy

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// Module is one module to publish: its path and the directory holding its go.mod.
type Module struct{ Path, Dir string }

// PseudoVersion is the v0.0.0 pseudo-version of a commit made at t (as `go get …@commit` names
// it); rev is the commit hash, of which the first 12 characters are used.
func PseudoVersion(t time.Time, rev string) string {
	return module.PseudoVersion("v0", "", t.UTC(), rev[:min(12, len(rev))])
}

// Publish writes mods at version (made at t) into the proxy tree under out.
func Publish(out, version string, t time.Time, mods []Module) error {
	published := map[string]bool{}
	for _, m := range mods {
		published[m.Path] = true
	}
	for _, m := range mods {
		if err := publish(out, version, t, m, published); err != nil {
			return fmt.Errorf("modproxy: %s: %w", m.Path, err)
		}
	}
	return nil
}

func publish(out, version string, t time.Time, m Module, published map[string]bool) error {
	path := filepath.Join(m.Dir, "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	goMod, err := ReleaseGoMod(path, data, version, published)
	if err != nil {
		return err
	}
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files, err := moduleFiles(m.Dir, goMod)
	if err != nil {
		return err
	}
	zf, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		return err
	}
	err = zip.Create(zf, module.Version{Path: m.Path, Version: version}, files)
	if cerr := zf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t.UTC()})
	for name, data := range map[string][]byte{version + ".mod": goMod, version + ".info": info, "list": []byte(version + "\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ReleaseGoMod returns data, the go.mod file at path, as published: requirements on published
// modules (the keys of published) at version, replace directives of published modules dropped.
// Other replace directives would mislead (a dependency's replaces are ignored by the go command,
// and go install pkg@version refuses a module that has any), so they are an error. tools/release
// commits the go.mod files of a release in this form.
func ReleaseGoMod(path string, data []byte, version string, published map[string]bool) ([]byte, error) {
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		return nil, err
	}
	for _, r := range f.Replace {
		if !published[r.Old.Path] {
			return nil, fmt.Errorf("go.mod replaces %s, which is not published with it", r.Old.Path)
		}
		if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
			return nil, err
		}
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

// moduleFiles lists the files of the module rooted at dir — not those of nested modules, not
// hidden directories — with goMod standing in for its go.mod.
func moduleFiles(dir string, goMod []byte) ([]zip.File, error) {
	var files []zip.File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); rel != "." && err == nil {
				return filepath.SkipDir // a nested module
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if rel == "go.mod" {
			files = append(files, memFile{name: rel, data: goMod})
			return nil
		}
		files = append(files, diskFile{name: rel, path: p})
		return nil
	})
	return files, err
}

type diskFile struct{ name, path string }

func (f diskFile) Path() string                 { return f.name }
func (f diskFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.path) }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.path) }

type memFile struct {
	name string
	data []byte
}

func (f memFile) Path() string                { return f.name }
func (f memFile) Lstat() (os.FileInfo, error) { return memInfo{f}, nil }
func (f memFile) Open() (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(f.data))), nil
}

type memInfo struct{ f memFile }

func (i memInfo) Name() string       { return path.Base(i.f.name) }
func (i memInfo) Size() int64        { return int64(len(i.f.data)) }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
