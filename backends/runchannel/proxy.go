package runchannel

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// upstream is an Upstream ready to serve.
type upstream struct {
	Upstream
	base  *url.URL
	proxy *httputil.ReverseProxy
}

// upstreamName is the shape of an Upstream's name: it is a path segment
// of the proxy's URLs.
var upstreamName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// maxErrorBody bounds the error answer of a provider that the proxy reads
// to take the real key out of it.
const maxErrorBody = 1 << 20

// upstreams checks the session's upstreams and makes their proxies.
func (s *Session) upstreams(list []Upstream) (map[string]*upstream, error) {
	ups := map[string]*upstream{}
	for _, u := range list {
		if !upstreamName.MatchString(u.Name) {
			return nil, fmt.Errorf("model provider name %q: use letters, digits, '.', '_' and '-' (at most 64), starting with a letter or digit", clip(u.Name, 80))
		}
		if ups[u.Name] != nil {
			return nil, fmt.Errorf("model provider %s is listed twice for the run channel", u.Name)
		}
		base, err := url.Parse(u.BaseURL)
		switch {
		case err != nil:
			return nil, fmt.Errorf("the base URL of model provider %s: %w", u.Name, err)
		case base.Scheme != "http" && base.Scheme != "https", base.Host == "":
			return nil, fmt.Errorf("the base URL of model provider %s is %q: write an http or https URL such as https://api.example.com/v1", u.Name, clip(u.BaseURL, 200))
		case base.User != nil, base.RawQuery != "", base.Fragment != "":
			// A key in the URL would travel where keys must not.
			return nil, fmt.Errorf("the base URL of model provider %s must not carry credentials, a query or a fragment: give the key as the provider's key, and the URL as scheme://host/path", u.Name)
		}
		base.Path = strings.TrimSuffix(base.Path, "/")
		base.RawPath = strings.TrimSuffix(base.RawPath, "/")
		up := &upstream{Upstream: u, base: base}
		up.Header = u.Header.Clone()
		up.proxy = &httputil.ReverseProxy{
			Rewrite:        up.rewrite,
			Transport:      s.opts.Transport,
			FlushInterval:  -1, // every write of the provider goes on at once: SSE
			ModifyResponse: up.scrub,
			ErrorHandler:   s.upstreamFailed(up),
			ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		}
		ups[u.Name] = up
		s.names = append(s.names, u.Name)
		for _, v := range up.credentials() {
			s.secret = append(s.secret, v)
		}
	}
	slices.Sort(s.names)
	return ups, nil
}

// minSecret is the shortest value taken for a credential when looking for
// it elsewhere (an environment, an error answer): a shorter "key" is a
// placeholder (a fake model's), and looking for it would find it
// everywhere.
const minSecret = 8

// credentials are the values of u that must not leave the server: its key
// and its extra headers' values.
func (u *upstream) credentials() []string {
	var out []string
	if len(u.Key) >= minSecret {
		out = append(out, u.Key)
	}
	for _, vs := range u.Header {
		for _, v := range vs {
			if len(v) >= minSecret {
				out = append(out, v)
			}
		}
	}
	return out
}

// serveModel proxies a request for /model/<provider>/<path>.
func (s *Session) serveModel(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/model/"), "/")
	up := s.ups[name]
	if up == nil {
		refuse(w, http.StatusForbidden, "permission_error", fmt.Sprintf(
			"iterion's model proxy forwards only to the run's model providers (%s): %q is not one of them", strings.Join(s.names, ", "), clip(name, 80)))
		return
	}
	if !s.dummyKeyed(r) {
		refuse(w, http.StatusUnauthorized, "authentication_error",
			"iterion's model proxy accepts only the key this run's sandbox was given (x-api-key or Authorization: Bearer)")
		return
	}
	if up.Key == "" {
		refuse(w, http.StatusUnauthorized, "authentication_error", fmt.Sprintf(
			"iterion has no key for model provider %s: set %s in the server's environment", name, keyEnvOf(up)))
		return
	}
	if r.Method != http.MethodPost && r.Method != http.MethodGet && r.Method != http.MethodHead {
		refuse(w, http.StatusMethodNotAllowed, "invalid_request_error", fmt.Sprintf(
			"iterion's model proxy forwards GET, HEAD and POST, not %s", clip(r.Method, 20)))
		return
	}
	if !cleanPath(rest, r.URL.EscapedPath()) {
		refuse(w, http.StatusForbidden, "permission_error", fmt.Sprintf(
			"iterion's model proxy forwards only below the base URL of %s: the path %s leaves it (. or .. segments, encoded slashes)", name, clip(r.URL.EscapedPath(), 200)))
		return
	}
	// Without full duplex, the server closes the request's body once the
	// answer's first bytes are flushed, while the transport may still read
	// it (to see its end): the transport then fails its write and closes
	// the provider's connection, cutting a stream in the middle. The
	// benchmarks found it; TestProxyStreamsOneAfterAnother keeps it fixed.
	_ = http.NewResponseController(w).EnableFullDuplex()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	up.proxy.ServeHTTP(rec, r)
	s.log.Debug("model request", "provider", name, "method", r.Method, "path", "/"+clip(rest, 200), "status", rec.status, "duration", time.Since(start))
}

func keyEnvOf(up *upstream) string {
	if up.KeyEnv != "" {
		return up.KeyEnv
	}
	return "the provider's key"
}

// dummyKeyed reports whether every credential r carries is the session's
// dummy key, and it carries one.
func (s *Session) dummyKeyed(r *http.Request) bool {
	seen := false
	for _, k := range r.Header.Values("X-Api-Key") {
		if !equal(k, s.key) {
			return false
		}
		seen = true
	}
	for _, a := range r.Header.Values("Authorization") {
		scheme, tok, ok := strings.Cut(a, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || !equal(strings.TrimSpace(tok), s.key) {
			return false
		}
		seen = true
	}
	return seen
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// cleanPath reports whether a path below the base URL stays below it: no
// "." or ".." segment, decoded (rest) or not, and no encoded slash or
// backslash, which a provider's router could read as a separator.
func cleanPath(rest, escaped string) bool {
	for _, seg := range strings.Split(rest, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	low := strings.ToLower(escaped)
	return !strings.Contains(low, "%2f") && !strings.Contains(low, "%5c") && !strings.Contains(escaped, `\`)
}

// rewrite makes the request to the provider: its base URL and the path
// below it, the real key instead of the dummy one, none of the session's
// own headers, and an Accept-Encoding of the transport's own (so an error
// answer arrives decoded and can be scrubbed).
func (u *upstream) rewrite(pr *httputil.ProxyRequest) {
	in := pr.In.URL
	prefix := "/model/" + u.Name
	out := *u.base
	out.Path = u.base.Path + strings.TrimPrefix(in.Path, prefix)
	if in.RawPath != "" {
		out.RawPath = u.base.EscapedPath() + strings.TrimPrefix(in.EscapedPath(), prefix)
	}
	out.RawQuery = in.RawQuery
	pr.Out.URL = &out
	pr.Out.Host = ""
	h := pr.Out.Header
	for k := range h {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Iterion-") {
			h.Del(k)
		}
	}
	h.Del("X-Api-Key")
	h.Del("Authorization")
	h.Del("Accept-Encoding")
	switch u.Auth {
	case AuthBearer:
		h.Set("Authorization", "Bearer "+u.Key)
	default:
		h.Set("X-Api-Key", u.Key)
	}
	for k, vs := range u.Header {
		h[http.CanonicalHeaderKey(k)] = slices.Clone(vs)
	}
}

// scrub takes the real key out of a provider's error answer, should the
// provider echo it. Successful answers stream through untouched.
func (u *upstream) scrub(res *http.Response) error {
	if res.StatusCode < 400 {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	res.Body.Close()
	if err != nil {
		return fmt.Errorf("reading the error answer of %s: %w", u.Name, err)
	}
	for _, v := range u.credentials() {
		body = bytes.ReplaceAll(body, []byte(v), []byte("[redacted]"))
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	res.ContentLength = int64(len(body))
	res.Header.Set("Content-Length", strconv.Itoa(len(body)))
	res.Header.Del("Content-Encoding")
	return nil
}

// upstreamFailed answers a request the provider could not serve: 502,
// naming the provider, so the CLI's own retry policy applies.
func (s *Session) upstreamFailed(up *upstream) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() != nil {
			return // the CLI went away, or the session ended
		}
		s.log.Warn("model provider unreachable", "provider", up.Name, "err", err)
		refuse(w, http.StatusBadGateway, "api_error", fmt.Sprintf(
			"iterion's model proxy could not reach model provider %s at %s: %v", up.Name, up.base.Redacted(), err))
	}
}

// refuse writes an error in the shape both the Anthropic and the OpenAI
// SDKs read ({"error": {"type", "message"}}).
func refuse(w http.ResponseWriter, status int, typ, msg string) {
	body := marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Should-Retry", "false")
	if status >= 500 {
		w.Header().Del("X-Should-Retry")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// statusRecorder keeps the status of an answer, for the log, and lets the
// proxy flush through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's flusher.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// marshal encodes plain data as JSON without escaping <, > and &, which
// the messages use and people read.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // plain data: cannot fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
