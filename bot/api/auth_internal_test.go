package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The peer's uid is checked before the token: another user is refused
// even with the token, and a peer nobody can tell is refused too.
func TestLocalAuthPeer(t *testing.T) {
	g := localGuard{uid: 1000, token: "secret-token", tokenFile: "/run/x.token"}
	h := localAuth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := CallerFrom(r.Context())
		_, _ = w.Write([]byte(c.Name + " via " + c.Via))
	}), g)
	tests := []struct {
		name     string
		peer     *peer
		wantCode int
		wantBody string
	}{
		{"the owner's uid", &peer{uid: 1000}, 200, UserName(1000) + " via cli"},
		{"another uid", &peer{uid: 1001}, 403, "this API answers only uid 1000, the user owning the store; the caller is uid 1001"},
		{"root", &peer{uid: 0}, 403, "the caller is uid 0"},
		{"unknown peer", &peer{uid: -1, err: errors.New("getsockopt: bad file")}, 401, "cannot tell which user is calling: getsockopt: bad file"},
		{"no peer recorded", nil, 401, "cannot tell which user is calling"},
		{"no peer credentials on this system", &peer{uid: -1, err: errNoPeerCred}, 200, UserName(1000) + " via cli"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/api/runs", nil)
			req.Header.Set("Authorization", "Bearer secret-token")
			if tc.peer != nil {
				req = req.WithContext(context.WithValue(req.Context(), peerKey{}, *tc.peer))
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("%d %s, want %d %q", rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
			if strings.Contains(rec.Body.String(), "secret-token") {
				t.Errorf("the reply repeats the token: %s", rec.Body.String())
			}
		})
	}
}

func TestUserName(t *testing.T) {
	if got := UserName(0); got != "root" {
		t.Errorf("UserName(0) = %q, want root", got)
	}
	if got := UserName(2147480000); got != "uid 2147480000" {
		t.Errorf("UserName of a uid without a user = %q", got)
	}
}
