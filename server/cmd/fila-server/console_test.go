package main

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestConsoleServesItsFilesWithAStrictPolicy: the page and its modules are served with their
// types, the Content-Security-Policy and nosniff; anything else is 404, other methods 405, "/"
// redirects to the console, and a second load with the ETag is 304.
func TestConsoleServesItsFilesWithAStrictPolicy(t *testing.T) {
	mux := http.NewServeMux()
	for _, r := range consoleRoutes() {
		mux.Handle(r.path, r.h)
	}
	get := func(method, path string, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec
	}
	for path, ctype := range map[string]string{
		"/console/": "text/html", "/console/index.html": "text/html", "/console/js/app.js": "text/javascript",
		"/console/style.css": "text/css", "/console/favicon.svg": "image/svg+xml",
	} {
		rec := get("GET", path)
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, rec.Code)
			continue
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", path, ct, ctype)
		}
		if rec.Header().Get("Content-Security-Policy") != consoleCSP || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: headers %v lack the policy or nosniff", path, rec.Header())
		}
		if again := get("GET", path, "If-None-Match", rec.Header().Get("ETag")); again.Code != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", path, again.Code)
		}
	}
	for _, path := range []string{"/console/js/", "/console/nope.js", "/console/../main.go", "/console/js/../../console.go"} {
		// The mux answers a path with .. with a redirect to its cleaned form; nothing is served.
		if rec := get("GET", path); rec.Code != http.StatusNotFound && rec.Code != http.StatusTemporaryRedirect {
			t.Errorf("GET %s: %d, want 404 (or the mux's redirect to the cleaned path)", path, rec.Code)
		}
	}
	if rec := get("POST", "/console/"); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /console/: %d, want 405", rec.Code)
	}
	if rec := get("GET", "/"); rec.Code != http.StatusFound || rec.Header().Get("Location") != consolePath {
		t.Errorf("GET /: %d to %q, want 302 to %s", rec.Code, rec.Header().Get("Location"), consolePath)
	}
	if rec := get("GET", "/other"); rec.Code != http.StatusNotFound {
		t.Errorf("GET /other: %d, want 404 (only / itself redirects)", rec.Code)
	}
}

// TestConsoleHasNoInlineScriptOrHTMLFromData keeps the rules the policy relies on: the page
// loads its scripts and styles from files (no inline script, handler attribute or style), and
// the scripts never assign HTML (innerHTML, outerHTML, insertAdjacentHTML, document.write):
// names reach the page as text only.
func TestConsoleHasNoInlineScriptOrHTMLFromData(t *testing.T) {
	root, _ := fs.Sub(consoleFiles, "console")
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|\son[a-z]+\s*=|<style|\sstyle\s*=`)
	html := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function\(`)
	err := fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, name)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(name, ".html"):
			if m := inline.Find(b); m != nil {
				t.Errorf("%s: inline script or style %q (the policy refuses it)", name, m)
			}
		case strings.HasSuffix(name, ".js"):
			if m := html.Find(b); m != nil {
				t.Errorf("%s: %q: build elements and set text instead", name, m)
			}
			if strings.Contains(string(b), "http://") || strings.Contains(string(b), "https://") {
				t.Errorf("%s: names another origin: the console loads nothing from elsewhere", name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
