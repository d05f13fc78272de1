package github

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// OAuth is the GitHub App's user sign-in, GitHub's web application flow:
// the address a person is sent to, and the exchange of the code GitHub
// sends back for who they are. The account links from Slack users use it,
// and later the admin page's sign-in.
type OAuth struct {
	o OAuthOptions
}

// OAuthOptions configure an OAuth. ClientID and ClientSecret are required.
type OAuthOptions struct {
	// ClientID and ClientSecret are the App's (its settings page).
	ClientID, ClientSecret string
	// WebURL is GitHub's web base ("" means https://github.com; GitHub
	// Enterprise's own), APIURL its REST base ("" means api.github.com).
	WebURL, APIURL string
	// HTTPClient carries the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// NewOAuth returns the sign-in o describes.
func NewOAuth(o OAuthOptions) *OAuth {
	o.WebURL = strings.TrimRight(cmp.Or(o.WebURL, DefaultGitURL), "/")
	return &OAuth{o: o}
}

// AuthorizeURL is where a person signs in to GitHub, to come back to
// redirect with state.
func (a *OAuth) AuthorizeURL(state, redirect string) string {
	q := url.Values{"client_id": {a.o.ClientID}, "redirect_uri": {redirect}, "state": {state}, "allow_signup": {"false"}}
	return a.o.WebURL + "/login/oauth/authorize?" + q.Encode()
}

// SignInError is GitHub refusing a sign-in's code (used, expired, or
// for another redirect): the person signs in again.
type SignInError struct{ Code, Description string }

func (e *SignInError) Error() string {
	return fmt.Sprintf("GitHub refused the sign-in (%s): %s", e.Code, e.Description)
}

// Identify exchanges the code GitHub sent back to redirect for a user
// token, and returns the account it is: its numeric id and its login. The
// token is used for that call alone and kept nowhere.
func (a *OAuth) Identify(ctx context.Context, code, redirect string) (int64, string, error) {
	hc := cmp.Or(a.o.HTTPClient, http.DefaultClient)
	form := url.Values{"client_id": {a.o.ClientID}, "client_secret": {a.o.ClientSecret}, "code": {code}, "redirect_uri": {redirect}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.o.WebURL+"/login/oauth/access_token", strings.NewReader(form.Encode()))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("exchanging a GitHub sign-in's code: %w", err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, "", fmt.Errorf("exchanging a GitHub sign-in's code: %w", err)
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tok) != nil {
		return 0, "", fmt.Errorf("exchanging a GitHub sign-in's code: GitHub answered %s", resp.Status)
	}
	if tok.Error != "" || tok.AccessToken == "" {
		return 0, "", &SignInError{Code: cmp.Or(tok.Error, "no_token"), Description: tok.Description}
	}
	c := gh.NewClient(hc).WithAuthToken(tok.AccessToken)
	if a.o.APIURL != "" {
		base, err := url.Parse(strings.TrimRight(a.o.APIURL, "/") + "/")
		if err != nil {
			return 0, "", fmt.Errorf("the GitHub API's URL %q: %w", a.o.APIURL, err)
		}
		c.BaseURL = base
	}
	u, gresp, err := c.Users.Get(ctx, "")
	if err != nil {
		return 0, "", classify("reading the signed-in GitHub user", gresp, err)
	}
	if u.GetID() == 0 || !ValidLogin(u.GetLogin()) {
		return 0, "", fmt.Errorf("GitHub's signed-in user has no id or login")
	}
	return u.GetID(), u.GetLogin(), nil
}
