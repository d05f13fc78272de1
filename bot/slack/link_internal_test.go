package slack

import (
	"net/url"
	"strings"
	"testing"
	"time"

	ghbot "github.com/iterion-bot/iterion/bot/github"
)

// A link's state is good for 10 minutes, names its Slack user, and is
// refused when another key signed it.
func TestLinkState(t *testing.T) {
	clk := &clock{t: time.Unix(1_900_000_000, 0)}
	mk := func(key string) *Linker {
		return NewLinker(LinkerOptions{OAuth: ghbot.NewUserAuth(ghbot.UserAuthOptions{ClientID: "id", ClientSecret: key}), Key: []byte(key),
			PublicURL: "https://iterion.example.com/", Clock: clk.now})
	}
	l := mk("secret one")
	u, _ := url.Parse(l.URL("T1", "U1"))
	state := u.Query().Get("state")
	if got, why := l.state(state); why != "" || got.Team != "T1" || got.User != "U1" || got.Nonce == "" {
		t.Errorf("state = %+v, %q", got, why)
	}
	if u.Query().Get("redirect_uri") != "https://iterion.example.com/auth/github/callback" {
		t.Errorf("redirect = %q", u.Query().Get("redirect_uri"))
	}
	if _, why := mk("secret two").state(state); !strings.Contains(why, "not made by this iterion server") {
		t.Errorf("another server's state: %q", why)
	}
	clk.add(10*time.Minute + time.Second)
	if _, why := l.state(state); !strings.Contains(why, "expired") {
		t.Errorf("an 11-minute-old state: %q", why)
	}
}
