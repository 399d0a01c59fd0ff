package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestReadyzFollowsThePhase(t *testing.T) {
	r := &readiness{}
	for _, tc := range []struct {
		p    phase
		code int
		body string
	}{
		{phaseRecovering, http.StatusServiceUnavailable, "recovering\n"},
		{phaseServing, http.StatusOK, "ready\n"},
		{phaseStopping, http.StatusServiceUnavailable, "stopping\n"},
	} {
		r.set(tc.p)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
		if w.Code != tc.code || w.Body.String() != tc.body {
			t.Errorf("%v: /readyz = %d %q, want %d %q", tc.p, w.Code, w.Body.String(), tc.code, tc.body)
		}
	}
}
