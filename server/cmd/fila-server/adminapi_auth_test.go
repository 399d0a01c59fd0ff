package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
)

// send makes one request with body (JSON unless edit says otherwise) and answers the response
// with its body read.
func send(t *testing.T, method, url, body string, edit func(*http.Request)) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if edit != nil {
		edit(req)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// withBearer, withCookies and withHeader edit a request.
func withBearer(key string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+key) }
}

func withCookies(cs ...*http.Cookie) func(*http.Request) {
	return func(r *http.Request) {
		for _, c := range cs {
			r.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		}
	}
}

func with(edits ...func(*http.Request)) func(*http.Request) {
	return func(r *http.Request) {
		for _, e := range edits {
			e(r)
		}
	}
}

func withHeader(k, v string) func(*http.Request) { return func(r *http.Request) { r.Header.Set(k, v) } }

// cookieNamed is the cookie of res named name.
func cookieNamed(t *testing.T, res *http.Response, name string) *http.Cookie {
	t.Helper()
	for _, c := range res.Cookies() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no cookie %s in %v", name, res.Header["Set-Cookie"])
	return nil
}

// errorBody decodes a refusal and checks it is {"error", "code"}.
func errorBody(t *testing.T, body string) (msg, code string) {
	t.Helper()
	var e struct{ Error, Code string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" || e.Code == "" {
		t.Fatalf("a refusal %q is not {\"error\", \"code\"}", body)
	}
	return e.Error, e.Code
}

// The console's session: a login sets an HttpOnly, SameSite=Strict cookie holding the key and a
// readable CSRF cookie; the cookie authenticates reads, changes only with X-CSRF-Token equal to
// the CSRF cookie, never from another origin; a revoked key in a cookie is refused at the next
// request; a logout clears both cookies. Bearer keys work as before, and a cross-origin request
// is refused whatever it carries.
func TestAdminAPISessions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	p := startServerEnv(t, bin, serverEnv("FILA_BOOTSTRAP_API_KEY="+testBootstrapKey), nil, "--data-dir", t.TempDir(),
		"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "warn")
	base := "http://" + p.addrs.HTTP + apiPath
	admin := handshake(t, p.addrs.FIBP, testBootstrapKey)
	if r := admin.Call(1, &fibp.CreateQueue{Name: "orders"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatal(r.ErrorCode)
	}
	var created struct{ ID, Secret string }
	apiOKBody(t, "POST", base+"keys", `{"name": "console", "superadmin": true}`, withBearer(testBootstrapKey), &created)

	// Refused logins.
	for _, tc := range []struct {
		name, body string
		edit       func(*http.Request)
		status     int
	}{
		{"unknown key", `{"api_key": "fila_not-a-key"}`, nil, 401},
		{"no key", `{}`, nil, 400},
		{"not JSON", `api_key=x`, withHeader("Content-Type", "text/plain"), 415},
		{"from another origin", `{"api_key": "` + created.Secret + `"}`, withHeader("Origin", "https://evil.example"), 403},
		{"cross-site", `{"api_key": "` + created.Secret + `"}`, withHeader("Sec-Fetch-Site", "cross-site"), 403},
	} {
		res, body := send(t, "POST", base+"session", tc.body, tc.edit)
		if res.StatusCode != tc.status || len(res.Cookies()) != 0 {
			t.Errorf("login with %s answered %d %s, cookies %v; want %d and none", tc.name, res.StatusCode, body, res.Cookies(), tc.status)
		}
	}

	// A login by form, then by JSON: the cookies' attributes.
	res, body := send(t, "POST", base+"session", "api_key="+created.Secret, withHeader("Content-Type", "application/x-www-form-urlencoded"))
	if res.StatusCode != 200 {
		t.Fatalf("a login by form answered %d %s", res.StatusCode, body)
	}
	res, body = send(t, "POST", base+"session", `{"api_key": "`+created.Secret+`"}`,
		with(withHeader("Origin", "http://"+p.addrs.HTTP), withHeader("Sec-Fetch-Site", "same-origin")))
	if res.StatusCode != 200 {
		t.Fatalf("a login answered %d %s", res.StatusCode, body)
	}
	var who sessionJSON
	if err := json.Unmarshal([]byte(body), &who); err != nil || who.KeyID != created.ID || !who.Authentication || who.CSRFToken == "" {
		t.Fatalf("a login answered %s", body)
	}
	session, csrf := cookieNamed(t, res, sessionCookie), cookieNamed(t, res, csrfCookie)
	if !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/" || session.Secure ||
		strings.Contains(session.Value, created.Secret) {
		t.Errorf("the session cookie is %s: want HttpOnly, SameSite=Strict, Path=/, not Secure over plain HTTP, the key encoded",
			session.String())
	}
	if csrf.HttpOnly || csrf.SameSite != http.SameSiteStrictMode || csrf.Path != "/" || csrf.Value != who.CSRFToken || len(csrf.Value) < 40 {
		t.Errorf("the CSRF cookie is %s: want readable, SameSite=Strict, Path=/, the token answered (%s)", csrf.String(), who.CSRFToken)
	}
	cookies := withCookies(session, csrf)

	// Reads with the cookie; changes only with the token; nothing from another origin.
	var me sessionJSON
	apiOKBody(t, "GET", base+"session", "", cookies, &me)
	if me.KeyID != created.ID || !me.Superadmin {
		t.Fatalf("GET session with the cookie: %+v", me)
	}
	newKeyBody := `{"name": "made-by-the-console"}`
	for _, tc := range []struct {
		name   string
		edit   func(*http.Request)
		status int
	}{
		{"no token", cookies, 403},
		{"a wrong token", with(cookies, withHeader(csrfHeader, csrf.Value+"x")), 403},
		{"the token without its cookie", with(withCookies(session), withHeader(csrfHeader, csrf.Value)), 403},
		{"another origin", with(cookies, withHeader(csrfHeader, csrf.Value), withHeader("Origin", "https://evil.example")), 403},
		{"another port of the host", with(cookies, withHeader(csrfHeader, csrf.Value), withHeader("Origin", "http://127.0.0.1:1")), 403},
		{"same-site", with(cookies, withHeader(csrfHeader, csrf.Value), withHeader("Sec-Fetch-Site", "same-site")), 403},
		{"a typed URL", with(cookies, withHeader(csrfHeader, csrf.Value), withHeader("Sec-Fetch-Site", "none")), 403},
		{"a null origin", with(cookies, withHeader(csrfHeader, csrf.Value), withHeader("Origin", "null")), 403},
		{"the token", with(cookies, withHeader(csrfHeader, csrf.Value), withHeader("Origin", "http://"+p.addrs.HTTP)), 200},
	} {
		res, body := send(t, "POST", base+"keys", newKeyBody, tc.edit)
		if res.StatusCode != tc.status {
			t.Errorf("a POST with the session cookie and %s answered %d %s, want %d", tc.name, res.StatusCode, body, tc.status)
		}
		if tc.status != 200 {
			errorBody(t, body)
		}
	}
	for _, tc := range []struct {
		name   string
		edit   func(*http.Request)
		status int
	}{
		{"cross-site", with(cookies, withHeader("Sec-Fetch-Site", "cross-site")), 403},
		{"another origin", with(cookies, withHeader("Origin", "https://evil.example")), 403},
		{"a bearer key from another origin", with(withBearer(testBootstrapKey), withHeader("Origin", "https://evil.example")), 403},
		{"a typed URL", with(cookies, withHeader("Sec-Fetch-Site", "none")), 200},
	} {
		res, body := send(t, "GET", base+"overview", "", tc.edit)
		if res.StatusCode != tc.status {
			t.Errorf("a GET with %s answered %d %s, want %d", tc.name, res.StatusCode, body, tc.status)
		}
	}

	// Revoking the key ends the session at once; so does a logout.
	apiOKBody(t, "POST", base+"keys/"+created.ID+"/revoke", "{}", withBearer(testBootstrapKey), nil)
	for _, edit := range []func(*http.Request){cookies, withBearer(created.Secret)} {
		res, body := send(t, "GET", base+"overview", "", edit)
		if res.StatusCode != 401 || !strings.Contains(body, "unknown or revoked") {
			t.Errorf("a request with a revoked key answered %d %s", res.StatusCode, body)
		}
	}
	res, _ = send(t, "DELETE", base+"session", "", cookies)
	if res.StatusCode != 200 {
		t.Fatalf("logout answered %d", res.StatusCode)
	}
	for _, name := range []string{sessionCookie, csrfCookie} {
		if c := cookieNamed(t, res, name); c.MaxAge >= 0 || c.Value != "" {
			t.Errorf("logout left cookie %s", c.String())
		}
	}

	// Without any key: refused, saying how to send one.
	for _, path := range []string{"overview", "queues/orders/messages", "keys", "cluster", "throttles", "session"} {
		res, body := send(t, "GET", base+path, "", nil)
		if msg, code := errorBody(t, body); res.StatusCode != 401 || code != "unauthorized" || !strings.Contains(msg, "Bearer") ||
			res.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s without a key answered %d %s", path, res.StatusCode, body)
		}
	}
	if res, body := send(t, "GET", base+"overview", "", withHeader("Authorization", "Basic eDp5")); res.StatusCode != 401 {
		t.Errorf("Basic authentication answered %d %s", res.StatusCode, body)
	}
}

// apiOKBody sends a request that must answer 200, decoded into v (unless nil).
func apiOKBody(t *testing.T, method, url, body string, edit func(*http.Request), v any) {
	t.Helper()
	res, got := send(t, method, url, body, edit)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s %s answered %d %s", method, url, res.StatusCode, got)
	}
	if res.Header.Get("Content-Type") != "application/json" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("%s %s answered Content-Type %q, X-Content-Type-Options %q", method, url, res.Header.Get("Content-Type"),
			res.Header.Get("X-Content-Type-Options"))
	}
	if v != nil {
		if err := json.Unmarshal([]byte(got), v); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, got)
		}
	}
}

// With authentication off the API answers loopback clients without a key, the console's pages
// included, but not a page served under another name (DNS rebinding) nor another origin's.
func TestAdminAPIWithoutAuthentication(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	p := startServer(t, bin, nil, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "warn")
	base := "http://" + p.addrs.HTTP + apiPath
	var o overviewJSON
	apiOKBody(t, "GET", base+"overview", "", nil, &o)
	if o.Authentication || o.NodeID == "" {
		t.Fatalf("overview without authentication: %+v", o)
	}
	var who sessionJSON
	apiOKBody(t, "POST", base+"session", "{}", withHeader("Origin", "http://"+p.addrs.HTTP), &who)
	if who.Authentication || !who.Superadmin {
		t.Fatalf("a login without authentication answered %+v", who)
	}
	apiOKBody(t, "GET", base+"keys", "", withHeader("Sec-Fetch-Site", "same-origin"), nil)
	for _, tc := range []struct {
		name string
		edit func(*http.Request)
		says string
	}{
		{"a rebound name", with(func(r *http.Request) { r.Host = "evil.example" }, withHeader("Sec-Fetch-Site", "same-origin")), "loopback address"},
		{"a rebound name's POST", with(func(r *http.Request) { r.Host = "evil.example:80" }, withHeader("Origin", "http://evil.example:80")), "loopback address"},
		{"another origin", withHeader("Origin", "https://evil.example"), "another origin"},
		{"cross-site", withHeader("Sec-Fetch-Site", "cross-site"), "another site"},
	} {
		res, body := send(t, "POST", base+"keys", `{"name": "x"}`, tc.edit)
		if msg, _ := errorBody(t, body); res.StatusCode != 403 || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: answered %d %s, want 403 saying %q", tc.name, res.StatusCode, body, tc.says)
		}
	}
	if ip := nonLoopbackIP(); ip != "" {
		p := startServer(t, bin, nil, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", ip+":0", "--log-level", "warn")
		res, body := send(t, "GET", "http://"+p.addrs.HTTP+apiPath+"overview", "", nil)
		if res.StatusCode != 403 || !strings.Contains(body, "loopback only") {
			t.Errorf("from %s without authentication: answered %d %s", ip, res.StatusCode, body)
		}
	}
}
