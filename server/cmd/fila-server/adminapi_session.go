package main

import (
	"mime"
	"net/http"

	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
)

// The console's session (adminauth.go):
//
//	POST   /api/v1/session  log in: the API key (JSON {"api_key": ...} or a form's api_key) is
//	                        checked and kept in the fila_session cookie, with a fresh fila_csrf
//	GET    /api/v1/session  who is logged in (any way of authenticating)
//	DELETE /api/v1/session  log out: both cookies cleared

const sessionPath = apiPath + "session"

func (api *adminAPI) sessionRoutes() {
	api.mux.HandleFunc("POST "+sessionPath, api.login)
	api.mux.HandleFunc("GET "+sessionPath, api.handle(whoAmI))
	api.mux.HandleFunc("DELETE "+sessionPath, api.logout)
}

// sessionJSON describes the caller.
type sessionJSON struct {
	// Authentication says whether the server requires keys; without, every caller (on loopback)
	// may do everything and KeyID is empty.
	Authentication bool   `json:"authentication"`
	KeyID          string `json:"key_id,omitempty"`
	Superadmin     bool   `json:"superadmin"`
	// CSRFToken is the fila_csrf cookie's value, on a login.
	CSRFToken string `json:"csrf_token,omitempty"`
}

func describeCaller(b *broker.Broker, p *auth.Principal) sessionJSON {
	s := sessionJSON{Authentication: b.Auth().Enabled(), Superadmin: p.Superadmin()}
	if p != nil {
		s.KeyID = p.ID()
	}
	return s
}

func whoAmI(b *broker.Broker, p *auth.Principal, _ *http.Request) (any, *httpError) {
	return describeCaller(b, p), nil
}

// login checks the key sent and sets the session's cookies. With authentication off it sets
// none and says so.
func (api *adminAPI) login(w http.ResponseWriter, r *http.Request) {
	b := api.b.Load()
	if b == nil {
		writeAPIError(w, refuse(http.StatusServiceUnavailable, "the server is still opening its store; ask again once /readyz says ready"))
		return
	}
	if herr := sameOrigin(r); herr != nil {
		writeAPIError(w, herr)
		return
	}
	st := b.Auth()
	if !st.Enabled() {
		if herr := loopbackOnly(r); herr != nil {
			writeAPIError(w, herr)
			return
		}
		writeAPIJSON(w, describeCaller(b, nil))
		return
	}
	secret, herr := loginKey(r)
	if herr != nil {
		writeAPIError(w, herr)
		return
	}
	p, herr := authenticate(st, secret)
	if herr != nil {
		writeAPIError(w, herr)
		return
	}
	cookies := sessionCookies(r, secret)
	for _, c := range cookies {
		http.SetCookie(w, c)
	}
	s := describeCaller(b, p)
	s.CSRFToken = cookies[1].Value
	writeAPIJSON(w, s)
}

// loginKey reads the key of a login: JSON {"api_key": ...}, or a form's api_key field.
func loginKey(r *http.Request) (string, *httpError) {
	switch mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt {
	case "application/json":
		var req struct {
			APIKey string `json:"api_key"`
		}
		if herr := readJSON(r, &req); herr != nil {
			return "", herr
		}
		if req.APIKey == "" {
			return "", refuse(http.StatusBadRequest, "send the key as {\"api_key\": \"...\"}")
		}
		return req.APIKey, nil
	case "application/x-www-form-urlencoded":
		r.Body = http.MaxBytesReader(nil, r.Body, maxBodyBytes)
		if err := r.ParseForm(); err != nil {
			return "", refuse(http.StatusBadRequest, "the form cannot be read: %v", err)
		}
		if k := r.PostForm.Get("api_key"); k != "" {
			return k, nil
		}
		return "", refuse(http.StatusBadRequest, "the form has no api_key")
	}
	return "", refuse(http.StatusUnsupportedMediaType, "send the key as JSON {\"api_key\": \"...\"} or a form's api_key field")
}

// logout clears the session's cookies; it needs no key (a revoked one included).
func (api *adminAPI) logout(w http.ResponseWriter, r *http.Request) {
	if herr := sameOrigin(r); herr != nil {
		writeAPIError(w, herr)
		return
	}
	for _, c := range sessionCookies(r, "") {
		http.SetCookie(w, c)
	}
	writeAPIJSON(w, map[string]bool{"logged_out": true})
}
