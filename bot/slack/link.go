package slack

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/bot/delivery"
	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/engine"
)

// CallbackPath is where GitHub sends people back after they sign in,
// under the server's public URL.
const CallbackPath = "/auth/github/callback"

// linkTTL is how long a link from /iterion link stays good.
const linkTTL = 10 * time.Minute

// linkStore is what linking needs of the store.
type linkStore interface {
	SetLink(ctx context.Context, l delivery.Link) error
	Link(ctx context.Context, team, user string) (delivery.Link, error)
	UseNonce(ctx context.Context, nonce string, expires time.Time) (bool, error)
}

// Linker links Slack users to their GitHub accounts: /iterion link (or
// the message an unlinked person gets) gives a link to GitHub's sign-in
// for the App, whose state names the Slack user, signed, single-use and
// good for 10 minutes; GitHub sends the person back to the callback,
// which checks the state, learns the account from GitHub and records the
// link, keyed on the account's numeric id.
type Linker struct {
	oauth   *ghbot.UserAuth
	key     []byte
	confirm []byte
	public  string
	store   linkStore
	now     func() time.Time
	log     *slog.Logger
}

// LinkerOptions configure a Linker; every field but Clock and Log is
// required.
type LinkerOptions struct {
	OAuth *ghbot.UserAuth
	// Key signs the states; the App's client secret serves.
	Key []byte
	// PublicURL is the server's address as browsers reach it
	// (ITERION_PUBLIC_URL); the callback is under it.
	PublicURL string
	Store     linkStore
	Clock     func() time.Time
	Log       *slog.Logger
}

// NewLinker returns the Linker o describes.
func NewLinker(o LinkerOptions) *Linker {
	mac := hmac.New(sha256.New, o.Key)
	mac.Write([]byte("iterion slack link state"))
	cm := hmac.New(sha256.New, o.Key)
	cm.Write([]byte("iterion slack link confirmation"))
	l := &Linker{oauth: o.OAuth, key: mac.Sum(nil), confirm: cm.Sum(nil), public: strings.TrimRight(o.PublicURL, "/"), store: o.Store, now: o.Clock, log: cmpLog(o.Log)}
	if l.now == nil {
		l.now = time.Now
	}
	return l
}

// linkState is what a sign-in's state says: who links, until when, and
// its single-use nonce.
type linkState struct {
	Team  string `json:"t"`
	User  string `json:"u"`
	Nonce string `json:"n"`
	Until int64  `json:"e"`
}

func (l *Linker) redirect() string { return l.public + CallbackPath }

// URL is the address that links the Slack user team/user: GitHub's
// sign-in for the App.
func (l *Linker) URL(team, user string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	payload, _ := json.Marshal(linkState{Team: team, User: user, Nonce: hex.EncodeToString(b), Until: l.now().Add(linkTTL).Unix()})
	enc := base64.RawURLEncoding.EncodeToString(payload)
	return l.oauth.AuthorizeURL(enc+"."+l.sign(enc), l.redirect())
}

func (l *Linker) sign(s string) string { return signWith(l.key, s) }

func signWith(key []byte, s string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(s))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// state checks a state: signed by this server, not expired; its nonce is
// used by the callback.
func (l *Linker) state(s string) (linkState, string) {
	enc, sig, ok := strings.Cut(s, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(l.sign(enc))) {
		return linkState{}, "This link was not made by this iterion server. Type /iterion link in Slack for a new one."
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	var st linkState
	if err != nil || json.Unmarshal(raw, &st) != nil || st.Team == "" || st.User == "" || st.Nonce == "" {
		return linkState{}, "This link is not one of iterion's. Type /iterion link in Slack for a new one."
	}
	if l.now().Unix() > st.Until {
		return linkState{}, "This link has expired (it is good for 10 minutes). Type /iterion link in Slack for a new one."
	}
	return st, ""
}

// Owns reports whether state is one of this Linker's (signed by it,
// expired or not): the callback URL is shared with the admin page's
// sign-in, and a state of the Linker's comes here.
func (l *Linker) Owns(state string) bool {
	enc, sig, ok := strings.Cut(state, ".")
	return ok && hmac.Equal([]byte(sig), []byte(l.sign(enc)))
}

// ServeHTTP is the callback (GET /auth/github/callback): GitHub sends the
// person back with a code and the state; the state is checked and used,
// the code exchanged for the account, and the link recorded.
func (l *Linker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		page(w, http.StatusBadRequest, "Not linked", "GitHub did not sign you in ("+e+"). Type /iterion link in Slack to try again.")
		return
	}
	st, why := l.state(q.Get("state"))
	if why != "" {
		page(w, http.StatusBadRequest, "Not linked", why)
		return
	}
	fresh, err := l.store.UseNonce(r.Context(), st.Nonce, time.Unix(st.Until, 0).Add(time.Minute))
	if err != nil {
		l.log.Error("recording a sign-in's nonce failed", "err", err)
		page(w, http.StatusServiceUnavailable, "Not linked", "iterion could not record the sign-in; try the link again in a moment.")
		return
	}
	if !fresh {
		page(w, http.StatusBadRequest, "Not linked", "This link was used already. Type /iterion link in Slack for a new one.")
		return
	}
	id, login, err := l.oauth.Identify(r.Context(), q.Get("code"), l.redirect())
	var refused *ghbot.SignInError
	switch {
	case errors.As(err, &refused):
		page(w, http.StatusBadRequest, "Not linked", "GitHub refused the sign-in: "+refused.Reason+". Type /iterion link in Slack for a new link.")
		return
	case err != nil:
		l.log.Error("identifying a GitHub sign-in failed", "err", err)
		page(w, http.StatusBadGateway, "Not linked", "iterion could not reach GitHub to finish the sign-in. Type /iterion link in Slack to try again.")
		return
	}
	// Not linked yet: whoever signed in may not be the Slack user who asked
	// for the link (a link passed on to someone else links the asker to
	// their account). The person types the confirmation in Slack as
	// themself, so only the one Slack user the link was made for, and only
	// with the account that signed in, completes it.
	payload, _ := json.Marshal(linkConfirm{Team: st.Team, User: st.User, GitHubID: id, Login: login, Nonce: st.Nonce, Until: l.now().Add(linkTTL).Unix()})
	enc := base64.RawURLEncoding.EncodeToString(payload)
	token := enc + "." + signWith(l.confirm, enc)
	l.log.Info("a GitHub sign-in for a Slack link waits for its confirmation in Slack", "team", st.Team, "user", st.User, "login", login, "github_id", id)
	confirmPage(w, login, st.User, "/iterion link "+token)
}

// linkConfirm is what a sign-in's confirmation says: the Slack user, the
// GitHub account that signed in, until when, and a single-use nonce.
type linkConfirm struct {
	Team     string `json:"t"`
	User     string `json:"u"`
	GitHubID int64  `json:"g"`
	Login    string `json:"l"`
	Nonce    string `json:"n"`
	Until    int64  `json:"e"`
}

// Confirm completes a link: /iterion link <confirmation>, typed by the
// Slack user team/user. It returns the word to them.
func (l *Linker) Confirm(ctx context.Context, team, user, token string) (string, error) {
	enc, sig, ok := strings.Cut(strings.TrimSpace(token), ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(signWith(l.confirm, enc))) {
		return "that is not a confirmation this iterion server made. Type `/iterion link` for a new link, sign in to GitHub, and paste the command the page shows.", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	var c linkConfirm
	if err != nil || json.Unmarshal(raw, &c) != nil || c.GitHubID == 0 || c.Nonce == "" {
		return "that is not a confirmation this iterion server made. Type `/iterion link` for a new link.", nil
	}
	if c.Team != team || c.User != user {
		l.log.Warn("a Slack link's confirmation typed by another Slack user", "team", team, "user", user, "made_for", c.User, "login", c.Login)
		return "this confirmation was made for another Slack user, so it links nothing: only the person who asked for the link can confirm it. If someone gave it to you, do not use it; type `/iterion link` for your own.", nil
	}
	if l.now().Unix() > c.Until {
		return "this confirmation has expired (it is good for 10 minutes). Type `/iterion link` for a new link.", nil
	}
	fresh, err := l.store.UseNonce(ctx, "confirm/"+c.Nonce, time.Unix(c.Until, 0).Add(time.Minute))
	if err != nil {
		return "", err
	}
	if !fresh {
		return "this confirmation was used already. Type `/iterion link` for a new link.", nil
	}
	if err := l.store.SetLink(ctx, delivery.Link{Team: c.Team, User: c.User, GitHubID: c.GitHubID, Login: c.Login}); err != nil {
		return "", err
	}
	l.log.Info("a Slack user linked their GitHub account", "team", c.Team, "user", c.User, "login", c.Login, "github_id", c.GitHubID)
	return fmt.Sprintf("your Slack account is now linked to GitHub @%s: iterion checks what you may answer as that account.", escape(c.Login)), nil
}

// confirmPage tells the person who signed in to finish in Slack, as
// themself.
func confirmPage(w http.ResponseWriter, login, slackUser, command string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>iterion: one step left</title></head>\n<body><h1>One step left</h1>"+
		"<p>You signed in to GitHub as @%s. To link Slack user %s to this account, type this in Slack yourself (in any channel with iterion):</p>\n"+
		"<pre>%s</pre>\n<p>It works for 10 minutes, once, and only for that Slack user. Never give it to anyone: whoever uses it answers iterion's questions as you. If you did not ask for this link in Slack yourself, close this page.</p></body></html>\n",
		html.EscapeString(login), html.EscapeString(slackUser), html.EscapeString(command))
}

// page answers the browser with a small page, and nothing it could run.
func page(w http.ResponseWriter, status int, title, text string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>iterion: %s</title></head>\n<body><h1>%s</h1><p>%s</p></body></html>\n",
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(text))
}

// storeLinks are the links of the store, as People reads them.
type storeLinks struct{ store linkStore }

func (s storeLinks) Link(ctx context.Context, team, user string) (string, error) {
	l, err := s.store.Link(ctx, team, user)
	if errors.Is(err, engine.ErrNotFound) {
		return "", nil
	}
	return l.Login, err
}
