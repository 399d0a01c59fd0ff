// Package buildinfo reports the version, commit and Go version the binary was built with, read
// from runtime/debug.ReadBuildInfo; a release build stamps its version with the linker. (The
// client module has its own copy: it never imports the server.)
package buildinfo

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
)

// Info is what the Go toolchain stamped into the binary.
type Info struct {
	Version   string `json:"version"`    // the release's (tools/release), else the module version of a tagged build, else "devel"
	Commit    string `json:"commit"`     // the release's (tools/release), else vcs.revision, else "unknown"
	Modified  bool   `json:"modified"`   // vcs.modified: the working tree had uncommitted changes
	GoVersion string `json:"go_version"` // the toolchain, such as go1.26.0
}

// version, when set, is the release's version, stamped by the release build (tools/release) with
// -ldflags "-X github.com/filamq/fila/server/internal/buildinfo.version=v1.2.3". It takes
// precedence over the module version, which a build inside the workspace never has.
var version string

// commit, when set, is the commit the release was made from, stamped the same way: the release's
// image is built from the commit before it, whose code is the same (only go.mod files differ).
var commit string

// pseudo matches a pseudo-version (v0.0.0-20261201115950-8a8d658abcde, with a +dirty suffix
// or not), which the go command stamps on untagged builds: those are "devel".
var pseudo = regexp.MustCompile(`[-.](0\.)?\d{14}-[0-9a-f]{12}(\+.*)?$`)

// Read returns the running binary's build information.
func Read() Info {
	info := Info{Version: "devel", Commit: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.Version = moduleVersion(bi.Main.Version)
	if version != "" {
		info.Version = version
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	if commit != "" {
		info.Commit, info.Modified = commit, false
	}
	return info
}

// moduleVersion is v for a tagged module version, "devel" for (devel), empty or a pseudo-version.
func moduleVersion(v string) string {
	if v == "" || v == "(devel)" || pseudo.MatchString(v) {
		return "devel"
	}
	return v
}

// CommitLabel is the commit with a "-dirty" suffix when the tree was modified.
func (i Info) CommitLabel() string {
	if i.Modified {
		return i.Commit + "-dirty"
	}
	return i.Commit
}

// String is the one line `--version` prints: "<program> <version> (commit <c>, <go version>)".
func (i Info) String(program string) string {
	return fmt.Sprintf("%s %s (commit %s, %s)", program, i.Version, i.CommitLabel(), i.GoVersion)
}
