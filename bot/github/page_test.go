package github_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/internal/fakegithub"
)

// signIn goes through the flow as a browser would: to the authorize page,
// which sends it back with a code, then the exchange.
func signIn(t *testing.T, u *ghbot.UserAuth, redirect string) (string, error) {
	t.Helper()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(u.AuthorizeURL("st4te", redirect))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize page: %s", resp.Status)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(back.String(), redirect) || back.Query().Get("state") != "st4te" {
		t.Fatalf("sent back to %q", resp.Header.Get("Location"))
	}
	return u.SignIn(context.Background(), back.Query().Get("code"), redirect)
}

func TestUserAuthSignIn(t *testing.T) {
	fake := fakegithub.New(t, "acme", "app")
	fake.OAuth = fakegithub.OAuth{ClientID: "Iv1.abc", ClientSecret: "shh",
		Orgs: map[string][]string{"acme": {"ana"}}, Teams: map[string][]string{"acme/maintainers": {"bo"}}}
	const redirect = "http://page.example/auth/github/callback"
	tests := []struct {
		name   string
		who    string
		orgs   []string
		teams  []string
		secret string
		want   string // login, or the refusal's words
	}{
		{"an org member", "ana", []string{"acme"}, nil, "shh", "ana"},
		{"a team member", "bo", []string{"acme"}, []string{"acme/maintainers"}, "shh", "bo"},
		{"anyone when nothing is required", "cy", nil, nil, "shh", "cy"},
		{"neither", "cy", []string{"acme"}, []string{"acme/maintainers"}, "shh", "cy is not an active member of acme or acme/maintainers"},
		{"a wrong secret", "ana", nil, nil, "nope", "incorrect_client_credentials"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake.OAuth.SignIn = tc.who
			u := ghbot.NewUserAuth(ghbot.UserAuthOptions{ClientID: "Iv1.abc", ClientSecret: tc.secret, WebURL: fake.GitURL(), APIURL: fake.URL(),
				Orgs: tc.orgs, Teams: tc.teams})
			login, err := signIn(t, u, redirect)
			got := login
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("sign-in = %q, want %q", got, tc.want)
			}
			if strings.Contains(got, tc.secret) {
				t.Errorf("the error repeats the secret: %q", got)
			}
		})
	}
	// A code is used once.
	fake.OAuth.SignIn = "ana"
	u := ghbot.NewUserAuth(ghbot.UserAuthOptions{ClientID: "Iv1.abc", ClientSecret: "shh", WebURL: fake.GitURL(), APIURL: fake.URL()})
	_, err := u.SignIn(context.Background(), "code-never-handed-out", redirect)
	var refused *ghbot.SignInError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "sign in again") {
		t.Errorf("an unknown code: %v, want a SignInError asking to sign in again", err)
	}
}

func TestPostURL(t *testing.T) {
	posts := map[string]string{"github-status-url": "https://github.com/acme/app/pull/7#issuecomment-10"}
	if got, want := ghbot.PostURL(posts, "42"), "https://github.com/acme/app/pull/7#issuecomment-42"; got != want {
		t.Errorf("PostURL = %q, want %q", got, want)
	}
	if got := ghbot.PostURL(nil, "42"); got != "" {
		t.Errorf("PostURL before the status comment = %q, want none", got)
	}
}
