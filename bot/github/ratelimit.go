package github

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RateLimitError is a request GitHub refused for a rate limit, read from
// its own headers (403 or 429): the primary limit (x-ratelimit-remaining
// 0) lifts at x-ratelimit-reset; a secondary one after Retry-After when
// GitHub gives it, else after a minute, doubling while it lasts.
type RateLimitError struct {
	Secondary bool
	// Status is GitHub's status code, 403 or 429.
	Status int
	// Until is when to try again.
	Until time.Time
}

func (e *RateLimitError) Error() string {
	kind := "rate limit"
	if e.Secondary {
		kind = "secondary rate limit"
	}
	return fmt.Sprintf("GitHub's %s (%d), until %s", kind, e.Status, e.Until.UTC().Format(time.RFC3339))
}

// maxSecondaryWait caps the doubling wait of a secondary limit without
// Retry-After.
const maxSecondaryWait = time.Hour

// rateLimiter is the transport under every GitHub client of the App: it
// turns a rate-limited answer into a *RateLimitError before go-github
// reads it, so go-github never keeps a client-wide refusal of its own
// (its secondary one waits for the primary window's reset, up to an hour)
// and detection depends on GitHub's headers, not on the wording of its
// documentation links.
type rateLimiter struct {
	base http.RoundTripper
	now  func() time.Time

	mu sync.Mutex
	// strikes counts the secondary limits in a row without Retry-After,
	// per credential (an installation's token, the App's JWT).
	strikes map[string]int
}

func newRateLimiter(base http.RoundTripper) *rateLimiter {
	return &rateLimiter{base: base, now: time.Now, strikes: map[string]int{}}
}

func (l *rateLimiter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	who := credential(req)
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		if resp.StatusCode < 300 {
			l.mu.Lock()
			delete(l.strikes, who)
			l.mu.Unlock()
		}
		return resp, nil
	}
	limited, err := l.limited(resp, who)
	if err != nil || limited == nil {
		return resp, err
	}
	resp.Body.Close()
	return nil, limited
}

// limited reads a 403 or 429: a *RateLimitError when it is a rate limit,
// nil when it is a refusal of another kind (a missing permission), with
// the body left readable.
func (l *rateLimiter) limited(resp *http.Response, who string) (*RateLimitError, error) {
	var readErr error
	message := func() string {
		// A 403 without the headers is a rate limit only when GitHub says
		// so in its message; otherwise it is a refusal, passed on.
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		readErr = err
		return string(body)
	}
	l.mu.Lock()
	n := l.strikes[who]
	l.mu.Unlock()
	e := readLimit(resp, message, l.now(), n)
	if readErr != nil {
		return nil, readErr
	}
	if e != nil && e.Secondary && resp.Header.Get("Retry-After") == "" {
		l.mu.Lock()
		l.strikes[who] = n + 1
		if len(l.strikes) > 10000 {
			clear(l.strikes) // credentials rotate hourly; only a back-off hint
		}
		l.mu.Unlock()
	}
	return e, nil
}

// readLimit reads a 403 or 429 as GitHub documents its rate limits:
// Retry-After is a secondary limit's wait; x-ratelimit-remaining 0 is the
// primary limit, until x-ratelimit-reset; a 429, or a 403 whose message
// speaks of a rate limit, without either is a secondary limit lasting a
// minute, doubled for each of the strikes before it. Anything else is
// not a rate limit (nil). message is read only when needed.
func readLimit(resp *http.Response, message func() string, now time.Time, strikes int) *RateLimitError {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return nil
	}
	h := resp.Header
	e := &RateLimitError{Status: resp.StatusCode}
	if s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && s >= 0 {
		e.Secondary, e.Until = true, now.Add(time.Duration(max(s, 1))*time.Second)
		return e
	}
	if h.Get("X-Ratelimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(h.Get("X-Ratelimit-Reset"), 10, 64); err == nil {
			e.Until = time.Unix(reset, 0)
			if !e.Until.After(now) {
				e.Until = now.Add(time.Second)
			}
			return e
		}
	}
	if resp.StatusCode == http.StatusForbidden && !strings.Contains(strings.ToLower(message()), "rate limit") {
		return nil
	}
	e.Secondary, e.Until = true, now.Add(min(time.Minute<<min(strikes, 6), maxSecondaryWait))
	return e
}

// credential names who a request is made as, for the back-off.
func credential(req *http.Request) string {
	a := req.Header.Get("Authorization")
	if len(a) > 24 {
		a = a[len(a)-24:] // the tail of a token identifies it well enough
	}
	return a
}
