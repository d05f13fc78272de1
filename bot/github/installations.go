package github

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// InstallationError is an installation GitHub will not mint a token for:
// the App was uninstalled (404), the installation is suspended (403), or
// GitHub refuses the App's key or this server's clock (401). Retrying
// cannot help: it lasts until an installation event says the App is
// back, so the work of that installation is held, not retried.
type InstallationError struct {
	ID     int64
	Status int
	// Since is when it was first seen.
	Since time.Time
}

func (e *InstallationError) Error() string {
	return fmt.Sprintf("GitHub mints no token for installation %d (%d): %s", e.ID, e.Status, e.Reason())
}

// Reason says what the status means and what to do about it.
func (e *InstallationError) Reason() string {
	switch e.Status {
	case http.StatusNotFound:
		return "the App was uninstalled; its work waits until the App is installed again"
	case http.StatusForbidden:
		return "the installation is suspended; its work waits until an owner unsuspends it"
	case http.StatusUnauthorized:
		return "GitHub refuses the App's JSON web token: check ITERION_GITHUB_APP_ID and ITERION_GITHUB_PRIVATE_KEY, and that this server's clock is right (NTP)"
	}
	return "GitHub refused the token"
}

// Hold names the hold its deliveries wait under.
func (e *InstallationError) Hold() string { return InstallationHold(e.ID) }

// InstallationHold names the hold the deliveries of a refused
// installation wait under.
func InstallationHold(id int64) string { return "github/installation/" + strconv.FormatInt(id, 10) }

// installationError is the *InstallationError of a token GitHub refused
// to mint, nil for any other error.
func installationError(id int64, err error) *InstallationError {
	var he *ghinstallation.HTTPError
	if !errors.As(err, &he) || he.Response == nil {
		return nil
	}
	he.Response.Body.Close() // ghinstallation leaves it open on a refusal
	switch he.Response.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return &InstallationError{ID: id, Status: he.Response.StatusCode}
	}
	return nil
}

// Installations keeps the installations GitHub refuses tokens for. Work
// for one of them (deliveries, outbox rows) is held instead of retried
// until an installation event releases it. It is said once, when first
// seen, in the log; Blocked feeds /metrics.
type Installations struct {
	log *slog.Logger
	now func() time.Time

	mu        sync.Mutex
	blocked   map[int64]*InstallationError
	onRelease []func(id int64)
}

// newInstallations returns an empty registry logging to log.
func newInstallations(log *slog.Logger) *Installations {
	return &Installations{log: cmpLog(log), now: time.Now, blocked: map[int64]*InstallationError{}}
}

func cmpLog(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// Block records that installation e.ID is refused and returns the
// registered error (with its first Since). It logs only the first time.
func (s *Installations) Block(e *InstallationError) *InstallationError {
	s.mu.Lock()
	old := s.blocked[e.ID]
	if old == nil || old.Status != e.Status {
		e2 := *e
		if e2.Since.IsZero() {
			e2.Since = s.now()
		}
		s.blocked[e.ID] = &e2
		s.mu.Unlock()
		s.log.Error("GitHub installation refused: its deliveries and comments are held until an installation event says the App is back",
			"installation", e.ID, "status", e.Status, "reason", e.Reason())
		return &e2
	}
	s.mu.Unlock()
	return old
}

// Blocked returns the error of a refused installation, nil when it is
// not known to be.
func (s *Installations) Blocked(id int64) *InstallationError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blocked[id]
}

// List returns the refused installations, by id.
func (s *Installations) List() []InstallationError {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]InstallationError, 0, len(s.blocked))
	for _, e := range s.blocked {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b InstallationError) int { return int(a.ID - b.ID) })
	return out
}

// OnRelease registers fn, called after an installation is released (its
// held work is to be taken up again).
func (s *Installations) OnRelease(fn func(id int64)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRelease = append(s.onRelease, fn)
}

// Release records that installation id is back (an installation event
// said so) and calls the OnRelease functions, even when it was not known
// to be blocked: work held by a previous process waits too.
func (s *Installations) Release(id int64, why string) {
	s.mu.Lock()
	_, was := s.blocked[id]
	delete(s.blocked, id)
	fns := slices.Clone(s.onRelease)
	s.mu.Unlock()
	if was {
		s.log.Info("GitHub installation is back: its held work resumes", "installation", id, "event", why)
	}
	for _, fn := range fns {
		fn(id)
	}
}

// installTransport is the transport of one installation's client: it
// refuses at once while the installation is blocked, turns a token GitHub
// will not mint into an *InstallationError (and blocks it), and forgets a
// token GitHub stopped accepting so the next request mints a new one.
type installTransport struct {
	app *App
	id  int64
	tr  *ghinstallation.Transport
}

func (t *installTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if e := t.app.installations.Blocked(t.id); e != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, e
	}
	resp, err := t.tr.RoundTrip(req)
	if err != nil {
		if e := installationError(t.id, err); e != nil {
			return nil, t.app.installations.Block(e)
		}
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		// A token revoked before its hour (the App uninstalled or
		// suspended): mint again next time, which says which.
		t.app.forget(t.id)
	}
	return resp, nil
}

// Collector reports the refused installations to Prometheus:
// iterion_github_installations_refused, by the status GitHub answered.
func (s *Installations) Collector() prometheus.Collector { return installationsCollector{s} }

var refusedDesc = prometheus.NewDesc("iterion_github_installations_refused",
	"GitHub App installations GitHub mints no token for (uninstalled 404, suspended 403, key or clock refused 401); their work is held.",
	[]string{"status"}, nil)

type installationsCollector struct{ s *Installations }

func (c installationsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- refusedDesc }

func (c installationsCollector) Collect(ch chan<- prometheus.Metric) {
	count := map[int]int{http.StatusUnauthorized: 0, http.StatusForbidden: 0, http.StatusNotFound: 0}
	for _, e := range c.s.List() {
		count[e.Status]++
	}
	for status, n := range count {
		ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.GaugeValue, float64(n), strconv.Itoa(status))
	}
}
