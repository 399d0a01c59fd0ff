// Package docs holds the project's documentation; its test checks that the documentation and the
// code cite only files that exist in the repository.
package docs

import (
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"testing"
)

var (
	// mdLink is a Markdown link target: ](target) or ](target#anchor).
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// mdCite is a file cited by name in prose or a comment: concepts.md, docs/queue-log.md.
	mdCite = regexp.MustCompile(`(?:^|[^\w./-])((?:\.\./|[\w-]+/)*[\w-]+\.md)\b`)
)

// outputs are files the tools write, named in the code that writes them, not citations.
var outputs = map[string]bool{"results.md": true}

// trackedFiles lists the repository's files (git ls-files) from the repository root.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", "..", "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	return strings.Fields(string(out))
}

// Every Markdown link in the repository's .md files points to a file that exists, and every
// file the docs, the specs or the code cite by name (concepts.md, docs/queue-log.md) is in the
// repository: a citation by bare name resolves to a file of that name anywhere in it (the
// semantics files are under docs/semantics/), a citation with a directory to that path.
func TestCitedFilesExist(t *testing.T) {
	files := trackedFiles(t)
	exists := map[string]bool{}
	byName := map[string]bool{}
	for _, f := range files {
		exists[f] = true
		byName[path.Base(f)] = true
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			exists[d] = true
		}
	}
	for _, f := range files {
		ext := path.Ext(f)
		if ext != ".md" && ext != ".go" && ext != ".yaml" {
			continue
		}
		data, err := os.ReadFile("../" + f)
		if err != nil {
			continue // deleted in the working tree
		}
		text := string(data)
		if ext == ".md" {
			for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
				target, _, _ := strings.Cut(m[1], "#")
				if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				if p := path.Clean(path.Join(path.Dir(f), target)); !exists[p] {
					t.Errorf("%s links to %s, which is not in the repository", f, m[1])
				}
			}
		}
		for _, m := range mdCite.FindAllStringSubmatch(text, -1) {
			cite := m[1]
			switch {
			case !strings.Contains(cite, "/"):
				if !byName[cite] && !outputs[cite] {
					t.Errorf("%s cites %s, which is not in the repository", f, cite)
				}
			case exists[path.Clean(path.Join(path.Dir(f), cite))], exists[path.Clean(cite)]:
			default:
				t.Errorf("%s cites %s, which is not in the repository", f, cite)
			}
		}
	}
}
