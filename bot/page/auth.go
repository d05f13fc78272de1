package page

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Cookies: the session, and the state of a sign-in with GitHub between
// the departure to GitHub and the return.
const (
	sessionCookie = "iterion_session"
	stateCookie   = "iterion_signin"
	// stateTTL bounds the trip to GitHub and back.
	stateTTL = 10 * time.Minute
)

// session is what a session cookie holds, signed.
type session struct {
	Login string `json:"login"`
	Admin bool   `json:"admin,omitempty"`
	// Token, on an admin's session, names the admin token it was opened
	// with (tokenMark): a new token ends the sessions of the old one.
	Token   string `json:"tok,omitempty"`
	Expires int64  `json:"exp"` // unix seconds
}

// tokenMark names the admin token in a session without holding it: a
// MAC of it under the session key, cut to 16 bytes.
func (s *Server) tokenMark() string {
	return base64.RawURLEncoding.EncodeToString(s.mac("admin-token", s.opts.AdminToken)[:16])
}

// signinState is what the state cookie holds, signed: the state sent to
// GitHub, and where to go once signed in.
type signinState struct {
	State   string `json:"state"`
	Next    string `json:"next"`
	Expires int64  `json:"exp"`
}

// seal signs v's JSON: base64(json).base64(hmac), under a purpose so that
// a value sealed for one cookie is no value of another.
func (s *Server) seal(purpose string, v any) string {
	b, _ := json.Marshal(v) // plain structs
	body := base64.RawURLEncoding.EncodeToString(b)
	return body + "." + base64.RawURLEncoding.EncodeToString(s.mac(purpose, body))
}

// open checks and decodes what seal made.
func (s *Server) open(purpose, sealed string, v any) bool {
	body, sig, ok := strings.Cut(sealed, ".")
	if !ok {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(purpose, body)) {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(body)
	return err == nil && json.Unmarshal(b, v) == nil
}

func (s *Server) mac(purpose, body string) []byte {
	m := hmac.New(sha256.New, s.opts.SessionKey)
	m.Write([]byte(purpose + "\x00" + body))
	return m.Sum(nil)
}

// viewer reads who makes r: the admin token as a bearer, else the session
// cookie. problem, when set, says what is wrong with a credential sent.
func (s *Server) viewer(r *http.Request) (v Viewer, ok bool, problem string) {
	if h := r.Header.Get("Authorization"); h != "" {
		token, isBearer := strings.CutPrefix(h, "Bearer ")
		if !isBearer || subtle.ConstantTimeCompare([]byte(token), []byte(s.opts.AdminToken)) != 1 {
			return v, false, "The Authorization header is not the admin token (send Authorization: Bearer <the admin token>)."
		}
		return Viewer{Login: AdminName, Admin: true}, true, ""
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return v, false, ""
	}
	var sess session
	if !s.open(sessionCookie, c.Value, &sess) || sess.Login == "" || s.now().Unix() >= sess.Expires {
		return v, false, ""
	}
	if sess.Admin && subtle.ConstantTimeCompare([]byte(sess.Token), []byte(s.tokenMark())) != 1 {
		return v, false, "" // opened with an admin token that is no longer the one
	}
	return Viewer{Login: sess.Login, Admin: sess.Admin}, true, ""
}

// secure reports whether cookies must be Secure: behind TLS, or at an
// https public address (TLS ended by a proxy in front).
func (s *Server) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(s.public, "https://")
}

func (s *Server) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: int(maxAge / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure(r)})
}

func (s *Server) clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure(r)})
}

// sessionOf is v's session until exp.
func (s *Server) sessionOf(v Viewer, exp time.Time) session {
	sess := session{Login: v.Login, Admin: v.Admin, Expires: exp.Unix()}
	if v.Admin {
		sess.Token = s.tokenMark()
	}
	return sess
}

// startSession signs v in and sends them to next.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, v Viewer, next string) {
	exp := s.now().Add(s.opts.SessionTTL)
	s.setCookie(w, r, sessionCookie, s.seal(sessionCookie, s.sessionOf(v, exp)), s.opts.SessionTTL)
	http.Redirect(w, r, localPath(next), http.StatusSeeOther)
}

// localPath is next when it is a path of this site, else "/": a link
// someone sent cannot make the sign-in send people elsewhere. Browsers
// drop tabs and newlines from an address and read a backslash as a slash,
// so "/\t/evil.example" and "/\\evil.example" are another site's: a path
// with a control character or a backslash is refused, as is one that
// does not parse as a path alone.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsRune(next, '\\') {
		return "/"
	}
	for _, c := range next {
		if c < 0x20 || c == 0x7f {
			return "/"
		}
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// loginData is the login page's.
type loginData struct {
	pageData
	Next   string
	GitHub bool
	Error  string
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	d := loginData{pageData: s.base(r, "Sign in", ""), Next: localPath(r.URL.Query().Get("next")), GitHub: s.opts.SignIn != nil}
	switch r.URL.Query().Get("error") {
	case "state":
		d.Error = "The sign-in with GitHub took too long, or came from another browser: sign in again."
	case "denied":
		d.Error = "GitHub did not sign you in (the App was not authorized): sign in again to retry."
	}
	s.render(w, r, http.StatusOK, "login", d)
}

// loginToken signs the admin in with the token typed in the form.
func (s *Server) loginToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	token := strings.TrimSpace(r.PostFormValue("token"))
	next := localPath(r.PostFormValue("next"))
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(s.opts.AdminToken)) != 1 {
		d := loginData{pageData: s.base(r, "Sign in", ""), Next: next, GitHub: s.opts.SignIn != nil,
			Error: "That is not the admin token. It is $ITERION_ADMIN_TOKEN, or the file whose path iterion serve printed at its start."}
		s.render(w, r, http.StatusUnauthorized, "login", d)
		return
	}
	s.startSession(w, r, Viewer{Login: AdminName, Admin: true}, next)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	s.clearCookie(w, r, sessionCookie)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// callbackURL is the OAuth callback's address: under the public address,
// else under the address the request came to.
func (s *Server) callbackURL(r *http.Request) string {
	base := s.public
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + "/auth/github/callback"
}

// githubStart sends the person to GitHub to sign in, with a fresh state
// kept in a signed cookie for the return.
func (s *Server) githubStart(w http.ResponseWriter, r *http.Request) {
	if s.opts.SignIn == nil {
		s.fail(w, r, http.StatusNotFound, "Sign-in with GitHub is not set up on this server: set ITERION_GITHUB_CLIENT_ID and ITERION_GITHUB_CLIENT_SECRET, or sign in with the admin token.")
		return
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	st := signinState{State: base64.RawURLEncoding.EncodeToString(b), Next: localPath(r.URL.Query().Get("next")), Expires: s.now().Add(stateTTL).Unix()}
	s.setCookie(w, r, stateCookie, s.seal(stateCookie, st), stateTTL)
	http.Redirect(w, r, s.opts.SignIn.AuthorizeURL(st.State, s.callbackURL(r)), http.StatusFound)
}

// githubCallback is where GitHub sends the person back: the state must be
// the one of their cookie, the code is exchanged for who they are.
func (s *Server) githubCallback(w http.ResponseWriter, r *http.Request) {
	if s.opts.SignIn == nil {
		s.fail(w, r, http.StatusNotFound, "Sign-in with GitHub is not set up on this server.")
		return
	}
	q := r.URL.Query()
	var st signinState
	c, err := r.Cookie(stateCookie)
	s.clearCookie(w, r, stateCookie)
	if err != nil || !s.open(stateCookie, c.Value, &st) || s.now().Unix() >= st.Expires ||
		subtle.ConstantTimeCompare([]byte(st.State), []byte(q.Get("state"))) != 1 {
		http.Redirect(w, r, "/login?error=state", http.StatusSeeOther)
		return
	}
	if q.Get("error") != "" || q.Get("code") == "" {
		http.Redirect(w, r, "/login?error=denied", http.StatusSeeOther)
		return
	}
	login, err := s.opts.SignIn.SignIn(r.Context(), q.Get("code"), s.callbackURL(r))
	if err != nil {
		if s.opts.Refused != nil && s.opts.Refused(err) {
			s.fail(w, r, http.StatusForbidden, "You cannot sign in here: "+err.Error()+".")
			return
		}
		s.log.Error("signing in with GitHub failed", "err", err)
		s.fail(w, r, http.StatusBadGateway, "Signing in with GitHub failed on GitHub's side or ours; try again in a moment.")
		return
	}
	s.startSession(w, r, Viewer{Login: login}, st.Next)
}
