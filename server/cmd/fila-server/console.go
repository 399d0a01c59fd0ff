package main

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// The web console (docs/console.md): a page and its scripts, served from the binary at
// consolePath on the HTTP listener. It is plain HTML, CSS and JavaScript modules kept in
// console/ and embedded as they are: nothing to build, nothing fetched from elsewhere. Everything
// it shows it reads from the admin API (/api/v1/...) as the signed-in user, so these files
// themselves are no secret and are served to anyone who can reach the listener.

// consolePath is where the console is served; "/" redirects there.
const consolePath = "/console/"

//go:embed console
var consoleFiles embed.FS

// consoleCSP is the Content-Security-Policy of every console answer: scripts, styles and
// images from the console's own origin only (no inline script or style, no eval), requests to
// the same origin only, and the page never framed (clickjacking).
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// consoleFile is one embedded file, read once.
type consoleFile struct {
	body []byte
	etag string
}

// console serves the embedded files by name; anything else (a directory, a missing file) is 404.
type console struct{ files map[string]consoleFile }

func newConsole() *console {
	c := &console{files: map[string]consoleFile{}}
	root, err := fs.Sub(consoleFiles, "console")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	err = fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(root, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		c.files[name] = consoleFile{body: body, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return c
}

func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache") // revalidated each load (ETag): a new binary's files are seen at once
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusMethodNotAllowed)
		_, _ = w.Write([]byte("405: the console's files are read with GET\n"))
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(r.URL.Path, consolePath)), "/")
	if name == "" {
		name = "index.html"
	}
	f, ok := c.files[name]
	if !ok {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("404: no such console file\n"))
		return
	}
	h.Set("ETag", f.etag)
	// ServeContent sets the type from the extension (Go's own table: .js is text/javascript,
	// which a module script needs under nosniff) and answers If-None-Match with 304.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
}

// redirectToConsole answers "/" with a redirect to the console.
func redirectToConsole(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, consolePath, http.StatusFound)
}

// consoleRoutes are the console's paths on the HTTP listener.
func consoleRoutes() []route {
	return []route{{consolePath, newConsole()}, {"/{$}", http.HandlerFunc(redirectToConsole)}}
}
