package api

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os/user"
	"strconv"
	"strings"
	"sync"
)

// Caller is who makes a request, as the authentication in front of the
// API established it. The API records answers as theirs; nothing in a
// request's body can change it.
type Caller struct {
	// Name is who they are: the OS user name of the socket's peer, or the
	// name of the TCP token.
	Name string
	// Via is the channel: "cli" on the local socket, "api" on TCP.
	Via string
}

type callerKey struct{}

// withCaller returns ctx carrying c.
func withCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller of the request whose context is ctx, set
// by RequireToken or ServeLocal.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// RequireToken wraps h for TCP: every request must carry "Authorization:
// Bearer <token>" (compared in constant time), and h sees it with the
// Caller {Name: name, Via: "api"}. An empty name means "api".
func RequireToken(token, name string, h http.Handler) http.Handler {
	if name == "" {
		name = "api"
	}
	c := Caller{Name: name, Via: "api"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := checkBearer(r, token); msg != "" {
			unauthorized(w, msg+" (send Authorization: Bearer <the server's ITERION_API_TOKEN>)")
			return
		}
		h.ServeHTTP(w, r.WithContext(withCaller(r.Context(), c)))
	})
}

// checkBearer returns what is wrong with r's token, "" when nothing. The
// message never repeats what was sent.
func checkBearer(r *http.Request, token string) string {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case r.Header.Get("Authorization") == "":
		return "missing token: the request has no Authorization header"
	case !ok:
		return "the Authorization header is not a bearer token"
	case token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1:
		return "wrong token"
	}
	return ""
}

func unauthorized(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusUnauthorized, errorBody{Error: msg, Code: "unauthorized"})
}

// peer is what the socket says about the process at its other end.
type peer struct {
	uid int
	err error
}

type peerKey struct{}

// localGuard is what a request on the local socket must match.
type localGuard struct {
	uid       int    // the owner's uid
	token     string // the owner's token
	tokenFile string // where clients read it, for the error message
}

// localAuth wraps h for the local socket: the peer must be of g.uid and
// carry g.token; h then sees the Caller {Name: the peer's user, Via: "cli"}.
func localAuth(h http.Handler, g localGuard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := r.Context().Value(peerKey{}).(peer)
		switch {
		case !ok:
			unauthorized(w, "cannot tell which user is calling")
			return
		case p.err == errNoPeerCred:
			p.uid = g.uid // the private directory and the token keep others out
		case p.err != nil:
			unauthorized(w, fmt.Sprintf("cannot tell which user is calling: %v", p.err))
			return
		case p.uid != g.uid:
			writeJSON(w, http.StatusForbidden, errorBody{
				Error: fmt.Sprintf("this API answers only uid %d, the user owning the store; the caller is uid %d", g.uid, p.uid),
				Code:  "forbidden"})
			return
		}
		if msg := checkBearer(r, g.token); msg != "" {
			unauthorized(w, msg+" (send Authorization: Bearer <the token in "+g.tokenFile+">)")
			return
		}
		h.ServeHTTP(w, r.WithContext(withCaller(r.Context(), Caller{Name: UserName(p.uid), Via: "cli"})))
	})
}

var userNames sync.Map // uid → name

// UserName is the OS user name of uid, or "uid N" when it has none. It is
// the name the API records for a caller on the local socket.
func UserName(uid int) string {
	if n, ok := userNames.Load(uid); ok {
		return n.(string)
	}
	name := "uid " + strconv.Itoa(uid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		name = u.Username
	}
	userNames.Store(uid, name)
	return name
}
