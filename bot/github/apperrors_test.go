package github

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/internal/fakegithub"
)

// appOnFake is the App on the documented fake GitHub.
func appOnFake(t *testing.T) (*App, *fakegithub.Server) {
	t.Helper()
	fake := fakegithub.New(t, "acme", "app")
	fake.Perms["ana"] = "write"
	app, err := NewApp(AppOptions{ID: fakegithub.AppID, PrivateKey: testKey(t), APIURL: fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return app, fake
}

// Rate limits are read from GitHub's headers by the App's transport: a
// secondary limit without Retry-After waits a minute, then doubles; it
// leaves no client-wide refusal behind, so the next call goes out; the
// primary limit waits for its reset.
func TestAppRateLimits(t *testing.T) {
	app, fake := appOnFake(t)
	ctx := context.Background()
	calls := 0
	limit := func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/permission") {
			return false
		}
		calls++
		fakegithub.WriteSecondaryLimit(w, http.StatusForbidden, 0)
		return true
	}
	fake.SetFail(limit)
	for i, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
		_, err := app.CanWrite(ctx, 42, "acme", "app", "ana")
		var later *RetryLater
		if !errors.As(err, &later) || !later.Limited || later.After < want-2*time.Second || later.After > want {
			t.Fatalf("secondary limit %d: %v, want a rate-limited retry in about %s", i+1, err, want)
		}
	}
	fake.SetFail(nil)
	if ok, err := app.CanWrite(ctx, 42, "acme", "app", "ana"); !ok || err != nil {
		t.Fatalf("the call after a secondary limit: %v, %v; want it made and answered", ok, err)
	}
	// The success reset the back-off.
	fake.SetFail(limit)
	_, err := app.CanWrite(ctx, 42, "acme", "app", "ana")
	var later *RetryLater
	if !errors.As(err, &later) || later.After > time.Minute {
		t.Errorf("after a success, a secondary limit waits %v, want a minute again", err)
	}
	if calls != 4 {
		t.Errorf("%d limited calls reached GitHub, want 4 (none refused by go-github itself)", calls)
	}
	reset := time.Now().Add(10 * time.Minute)
	fake.SetFail(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/permission") {
			return false
		}
		fakegithub.WritePrimaryLimit(w, http.StatusTooManyRequests, reset)
		return true
	})
	_, err = app.CanWrite(ctx, 42, "acme", "app", "ana")
	if !errors.As(err, &later) || !later.Limited || later.After < 9*time.Minute || later.After > 10*time.Minute {
		t.Errorf("a 429 primary limit: %v, want a retry at its reset, in about 10m", err)
	}
}

// An installation GitHub mints no token for is refused for what it is, at
// once and without a network call after the first, and said once; its
// release lets calls through again.
func TestAppInstallationRefused(t *testing.T) {
	for _, tc := range []struct {
		state  fakegithub.Installation
		status int
		says   string
	}{
		{fakegithub.Uninstalled, http.StatusNotFound, "uninstalled"},
		{fakegithub.Suspended, http.StatusForbidden, "suspended"},
		{fakegithub.KeyRejected, http.StatusUnauthorized, "ITERION_GITHUB_PRIVATE_KEY"},
	} {
		t.Run(tc.says, func(t *testing.T) {
			app, fake := appOnFake(t)
			var released []int64
			app.Installations().OnRelease(func(id int64) { released = append(released, id) })
			ctx := context.Background()
			fake.SetInstallation(tc.state)
			_, err := app.CanWrite(ctx, 42, "acme", "app", "ana")
			var ie *InstallationError
			if !errors.As(err, &ie) || ie.ID != 42 || ie.Status != tc.status || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("CanWrite on a refused installation: %v, want an InstallationError %d naming %q", err, tc.status, tc.says)
			}
			var later *RetryLater
			if errors.As(err, &later) {
				t.Errorf("a refused installation is retried: %v", err)
			}
			before := len(fake.Calls())
			if _, err := app.Token(ctx, 42); !errors.As(err, &ie) {
				t.Errorf("Token on a refused installation: %v", err)
			}
			if n := len(fake.Calls()) - before; n != 0 {
				t.Errorf("%d calls to GitHub for a known refused installation, want none", n)
			}
			if got := app.Installations().List(); len(got) != 1 || got[0].ID != 42 {
				t.Errorf("blocked installations = %+v", got)
			}
			fake.SetInstallation(fakegithub.Installed)
			app.Installations().Release(42, "installation created")
			if ok, err := app.CanWrite(ctx, 42, "acme", "app", "ana"); !ok || err != nil {
				t.Errorf("after the release: %v, %v", ok, err)
			}
			if len(released) != 1 || released[0] != 42 {
				t.Errorf("release hooks called with %v", released)
			}
		})
	}
}

// A token revoked before its hour (the App uninstalled while its token
// was cached) is forgotten: the next call mints again and learns why.
func TestAppRevokedTokenMintsAgain(t *testing.T) {
	app, fake := appOnFake(t)
	ctx := context.Background()
	if ok, err := app.CanWrite(ctx, 42, "acme", "app", "ana"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	fake.SetInstallation(fakegithub.Uninstalled)
	_, err := app.CanWrite(ctx, 42, "acme", "app", "ana")
	var later *RetryLater
	if !errors.As(err, &later) || later.After > 10*time.Second {
		t.Fatalf("a revoked token: %v, want a short retry", err)
	}
	_, err = app.CanWrite(ctx, 42, "acme", "app", "ana")
	var ie *InstallationError
	if !errors.As(err, &ie) || ie.Status != http.StatusNotFound {
		t.Errorf("the retry: %v, want the installation refused (404)", err)
	}
}
