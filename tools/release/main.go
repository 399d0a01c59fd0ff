// Command release makes a Fila release, or a snapshot of one, into dist/ (docs/releasing.md):
//
//   - fila and fila-server for linux and darwin on amd64 and arm64, built with CGO_ENABLED=0 and
//     -trimpath and stamped with the version, in one fila_<version>_<os>_<arch>.tar.gz each (the
//     two binaries, LICENSE, README.md), and checksums.txt (SHA-256, sha256sum's format), checked
//     after writing;
//   - every workspace module (go.work) as a release publishes it, into dist/modules, a file-based
//     module proxy: each go.mod requiring the other modules at the version and without replace
//     lines, so that go get and go install work outside the repository;
//   - the container image (deploy/Dockerfile) with the version (and a release's tagged commit)
//     stamped, where `docker version` answers, else it says it skipped.
//
// A release (-version vX.Y.Z) also commits: on the current branch, whose working tree must be
// clean, a commit with the go.mod files in their published form, tagged for every module as Go
// names a nested module's versions (vX.Y.Z, client/vX.Y.Z, generated/vX.Y.Z, …), and a commit
// after it that gives the go.mod files their replace lines back for work inside the repository.
// The binaries are built from a checkout of the tagged commit. Nothing is pushed: the tool
// prints the git push command. A snapshot (-snapshot) commits and tags nothing; its binaries are
// built from the working tree.
//
// Usage, from the repository root (make release VERSION=vX.Y.Z, make release-snapshot):
//
//	go run ./tools/release -version v0.3.0
//	go run ./tools/release -snapshot [-version v0.3.0-rc.1] [-platforms linux/amd64] [-image=false]
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/filamq/fila/tools/internal/repo"
)

func main() {
	o := options{log: os.Stdout}
	var platforms string
	flag.StringVar(&o.version, "version", "", "the version, vMAJOR.MINOR.PATCH[-PRERELEASE] (a snapshot's default: v0.0.0-snapshot-<commit>)")
	flag.BoolVar(&o.snapshot, "snapshot", false, "build everything into the output directory, commit and tag nothing")
	flag.StringVar(&o.dist, "dist", "dist", "the output directory (emptied first; it must be empty or hold an earlier release's output)")
	flag.StringVar(&platforms, "platforms", strings.Join(defaultPlatforms, ","), "the os/arch pairs to build, comma separated (host: "+runtime.GOOS+"/"+runtime.GOARCH+")")
	flag.BoolVar(&o.image, "image", true, "build the container image where `docker version` answers")
	flag.BoolVar(&o.checkInstall, "check-install", true, "go install fila and fila-server from dist/modules outside the workspace, as a user would, and run them")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "release: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	var err error
	if o.platforms, err = parsePlatforms(platforms); err == nil {
		o.root, err = repo.Root()
	}
	if err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}
