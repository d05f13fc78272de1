package runchannel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
)

const (
	realAnthropic = "sk-ant-REAL-4f1d2a9c77"
	realOpenAI    = "sk-proj-REAL-91be03aa55"
	realGateway   = "gw-REAL-6c2d7e1f00"
)

// seen is what an upstream received.
type seen struct {
	Path, Query, XAPIKey, Auth, Gateway, Iterion, Host string
}

// recordingUpstream answers 200 "ok" and records each request.
func recordingUpstream(t testing.TB) (*httptest.Server, func() []seen) {
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{Path: r.URL.Path, Query: r.URL.RawQuery, XAPIKey: r.Header.Get("X-Api-Key"), Auth: r.Header.Get("Authorization"),
			Gateway: r.Header.Get("X-Gateway-Token"), Iterion: r.Header.Get("X-Iterion-Run"), Host: r.Host})
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), got...)
	}
}

func upstreamsAt(base string) []runchannel.Upstream {
	return []runchannel.Upstream{
		{Name: "anthropic", BaseURL: base, Key: realAnthropic, Auth: runchannel.AuthAPIKey, KeyEnv: "ANTHROPIC_API_KEY"},
		{Name: "openai", BaseURL: base + "/v1/", Key: realOpenAI, Auth: runchannel.AuthBearer, KeyEnv: "OPENAI_API_KEY"},
		{Name: "zai", BaseURL: base + "/api/paas/v4", Key: realOpenAI, Auth: runchannel.AuthBearer,
			Header: http.Header{"X-Gateway-Token": {realGateway}}},
		{Name: "nokey", BaseURL: base, KeyEnv: "NOKEY_API_KEY"},
	}
}

// The proxy forwards below each provider's base URL, with the real key
// in place of the dummy one, however the CLI sent it, and none of the
// channel's headers.
func TestProxyForwardsWithTheRealKey(t *testing.T) {
	up, got := recordingUpstream(t)
	s := open(t, &engine.Task{RunID: "r1", NodeID: "n"}, runchannel.Options{Upstreams: upstreamsAt(up.URL)})
	hc := unixClient(s.Socket())
	host := strings.TrimPrefix(up.URL, "http://")
	cases := []struct {
		name, path string
		header     http.Header
		want       seen
	}{
		{name: "anthropic, x-api-key", path: "/model/anthropic/v1/messages?beta=true", header: http.Header{"X-Api-Key": {s.Key()}},
			want: seen{Path: "/v1/messages", Query: "beta=true", XAPIKey: realAnthropic, Host: host}},
		{name: "anthropic, bearer", path: "/model/anthropic/v1/messages", header: http.Header{"Authorization": {"Bearer " + s.Key()}},
			want: seen{Path: "/v1/messages", XAPIKey: realAnthropic, Host: host}},
		{name: "openai", path: "/model/openai/chat/completions", header: http.Header{"Authorization": {"Bearer " + s.Key()}, "X-Iterion-Run": {"r1"}},
			want: seen{Path: "/v1/chat/completions", Auth: "Bearer " + realOpenAI, Host: host}},
		{name: "custom provider with its own header", path: "/model/zai/chat/completions", header: http.Header{"Authorization": {"bearer " + s.Key()}},
			want: seen{Path: "/api/paas/v4/chat/completions", Auth: "Bearer " + realOpenAI, Gateway: realGateway, Host: host}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1"+tc.path, strings.NewReader("{}"))
			req.Header = tc.header
			res, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || string(body) != "ok" {
				t.Fatalf("answer = %d %q, want 200 ok", res.StatusCode, body)
			}
			all := got()
			if len(all) != i+1 {
				t.Fatalf("upstream saw %d requests, want %d", len(all), i+1)
			}
			if diff := cmp.Diff(tc.want, all[i]); diff != "" {
				t.Errorf("upstream saw (-want +got):\n%s", diff)
			}
		})
	}
}

// Everything but a dummy-keyed request below a provider's base URL is
// refused, with a message that names what is allowed; none of it reaches
// the provider.
func TestProxyRefuses(t *testing.T) {
	up, got := recordingUpstream(t)
	s := open(t, &engine.Task{RunID: "r1", NodeID: "n"}, runchannel.Options{Upstreams: upstreamsAt(up.URL)})
	key := "X-Api-Key: " + s.Key() + "\r\n"
	cases := []struct {
		name, req  string
		wantStatus int
		want       string
	}{
		{"no key", "POST /model/anthropic/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 401, "accepts only the key this run's sandbox was given"},
		{"the real key itself", "POST /model/anthropic/v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + realAnthropic + "\r\nContent-Length: 0\r\n\r\n", 401, "accepts only the key"},
		{"a second, other credential", "POST /model/openai/chat/completions HTTP/1.1\r\nHost: x\r\n" + key + "Authorization: Bearer sk-other\r\nContent-Length: 0\r\n\r\n", 401, "accepts only the key"},
		{"a basic credential", "POST /model/openai/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Basic " + s.Key() + "\r\nContent-Length: 0\r\n\r\n", 401, "accepts only the key"},
		{"another host, absolute request line", "GET http://169.254.169.254/latest/meta-data HTTP/1.1\r\nHost: 169.254.169.254\r\n" + key + "\r\n", 403, "not a general proxy: it forwards only to the run's model providers (anthropic, nokey, openai, zai)"},
		{"connect", "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n" + key + "\r\n", 403, "not a general proxy"},
		{"another path prefix", "GET /v1/messages HTTP/1.1\r\nHost: x\r\n" + key + "\r\n", 403, "under /model/<provider>/: /v1/messages is not one of their paths"},
		{"the local admin API", "GET /api/runs HTTP/1.1\r\nHost: x\r\n" + key + "\r\n", 403, "/api/runs is not one of their paths"},
		{"an unknown provider", "POST /model/evil/v1/messages HTTP/1.1\r\nHost: x\r\n" + key + "Content-Length: 0\r\n\r\n", 403, `(anthropic, nokey, openai, zai): "evil" is not one of them`},
		{"dot-dot", "POST /model/zai/../../admin HTTP/1.1\r\nHost: x\r\n" + key + "Content-Length: 0\r\n\r\n", 403, "leaves it"},
		{"encoded dot-dot", "POST /model/zai/%2e%2e/%2E%2E/admin HTTP/1.1\r\nHost: x\r\n" + key + "Content-Length: 0\r\n\r\n", 403, "leaves it"},
		{"encoded slash", "POST /model/zai/..%2f..%2fadmin HTTP/1.1\r\nHost: x\r\n" + key + "Content-Length: 0\r\n\r\n", 403, "leaves it"},
		{"another method", "DELETE /model/openai/files/f1 HTTP/1.1\r\nHost: x\r\n" + key + "\r\n", 405, "GET, HEAD and POST, not DELETE"},
		{"a provider the server has no key for", "POST /model/nokey/v1/messages HTTP/1.1\r\nHost: x\r\n" + key + "Content-Length: 0\r\n\r\n", 401, "no key for model provider nokey: set NOKEY_API_KEY"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, body := rawRequest(t, s.Socket(), tc.req)
			var e struct {
				Error struct{ Message string }
			}
			_ = json.Unmarshal([]byte(body), &e)
			if res.StatusCode != tc.wantStatus || !strings.Contains(e.Error.Message, tc.want) {
				t.Errorf("answer = %d %s, want %d saying %q", res.StatusCode, body, tc.wantStatus, tc.want)
			}
			if !strings.Contains(body, `"type":"error"`) {
				t.Errorf("the answer is not in the providers' error shape: %s", body)
			}
			if strings.Contains(body, realAnthropic) || strings.Contains(body, realOpenAI) {
				t.Errorf("a real key in the answer: %s", body)
			}
		})
	}
	if n := len(got()); n != 0 {
		t.Errorf("the upstream received %d refused requests", n)
	}
}

// A provider's error answer that echoes the key reaches the CLI without
// it.
func TestProxyScrubsTheKeyFromErrors(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s (gateway %s)"}}`, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), r.Header.Get("X-Gateway-Token"))
	}))
	defer up.Close()
	s := open(t, &engine.Task{}, runchannel.Options{Upstreams: upstreamsAt(up.URL)})
	res, body := rawRequest(t, s.Socket(), "POST /model/zai/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+s.Key()+"\r\nAccept-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}")
	if res.StatusCode != 401 {
		t.Fatalf("status = %d, want the provider's 401", res.StatusCode)
	}
	if strings.Contains(body, realOpenAI) || strings.Contains(body, realGateway) || !strings.Contains(body, "Incorrect API key provided: [redacted] (gateway [redacted])") {
		t.Errorf("body = %s, want the keys redacted", body)
	}
}

// A provider that cannot be reached is a 502 naming it, so the CLI's
// own retries apply.
func TestProxyUnreachableProvider(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	base := up.URL
	up.Close()
	s := open(t, &engine.Task{}, runchannel.Options{Upstreams: upstreamsAt(base)})
	res, body := rawRequest(t, s.Socket(), "POST /model/anthropic/v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: "+s.Key()+"\r\nContent-Length: 0\r\n\r\n")
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(body, "could not reach model provider anthropic at "+base) {
		t.Errorf("answer = %d %s, want 502 naming the provider", res.StatusCode, body)
	}
}

// A stream goes through event by event: the provider sends the next event
// only once the CLI has read the previous one, so a proxy that buffered
// would never deliver the first.
func TestProxyStreamsEachChunk(t *testing.T) {
	const events = 5
	next := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range events {
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"i\":%d}\n\n", i)
			if err := rc.Flush(); err != nil {
				return
			}
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	}))
	defer up.Close()
	s := open(t, &engine.Task{}, runchannel.Options{Upstreams: upstreamsAt(up.URL)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a failure, not a wait: a buffering proxy hangs
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/model/anthropic/v1/messages", strings.NewReader(`{"stream":true}`))
	req.Header.Set("X-Api-Key", s.Key())
	res, err := unixClient(s.Socket()).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	rd := bufio.NewReader(res.Body)
	for i := range events {
		var event string
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("event %d: %v (the stream was held back)", i, err)
			}
			if line == "\n" {
				break
			}
			event += line
		}
		if want := fmt.Sprintf("event: content_block_delta\ndata: {\"i\":%d}\n", i); event != want {
			t.Fatalf("event %d = %q, want %q", i, event, want)
		}
		select {
		case next <- struct{}{}:
		case <-ctx.Done():
			t.Fatalf("event %d: the provider's handler is gone (its connection was cut)", i)
		}
	}
	if rest, _ := io.ReadAll(rd); len(rest) != 0 {
		t.Errorf("after the last event: %q", rest)
	}
}

func TestUpstreamsFromEnv(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want []runchannel.Upstream
	}{
		{name: "nothing set: the public APIs, without keys", env: nil, want: []runchannel.Upstream{
			{Name: "anthropic", BaseURL: "https://api.anthropic.com", KeyEnv: "ANTHROPIC_API_KEY"},
			{Name: "openai", BaseURL: "https://api.openai.com/v1", Auth: runchannel.AuthBearer, KeyEnv: "OPENAI_API_KEY"},
		}},
		{name: "keys and base URLs", env: map[string]string{"ANTHROPIC_API_KEY": "a", "ANTHROPIC_AUTH_TOKEN": "ignored", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "OPENAI_API_KEY": "o", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, want: []runchannel.Upstream{
			{Name: "anthropic", BaseURL: "http://127.0.0.1:9", Key: "a", KeyEnv: "ANTHROPIC_API_KEY"},
			{Name: "openai", BaseURL: "http://127.0.0.1:9/v1", Key: "o", Auth: runchannel.AuthBearer, KeyEnv: "OPENAI_API_KEY"},
		}},
		{name: "an Anthropic auth token", env: map[string]string{"ANTHROPIC_AUTH_TOKEN": "t"}, want: []runchannel.Upstream{
			{Name: "anthropic", BaseURL: "https://api.anthropic.com", Key: "t", Auth: runchannel.AuthBearer, KeyEnv: "ANTHROPIC_AUTH_TOKEN"},
			{Name: "openai", BaseURL: "https://api.openai.com/v1", Auth: runchannel.AuthBearer, KeyEnv: "OPENAI_API_KEY"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := runchannel.UpstreamsFromEnv(func(k string) string { return tc.env[k] })
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("upstreams (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenRefusesBadUpstreams(t *testing.T) {
	cases := []struct {
		name string
		up   runchannel.Upstream
		want string
	}{
		{"bad name", runchannel.Upstream{Name: "a/b", BaseURL: "https://x"}, `model provider name "a/b": use letters`},
		{"not http", runchannel.Upstream{Name: "a", BaseURL: "file:///etc/passwd"}, "write an http or https URL"},
		{"no host", runchannel.Upstream{Name: "a", BaseURL: "https:///v1"}, "write an http or https URL"},
		{"a key in the URL", runchannel.Upstream{Name: "a", BaseURL: "https://user:sk-x@api.example.com"}, "must not carry credentials"},
		{"a query", runchannel.Upstream{Name: "a", BaseURL: "https://api.example.com/v1?key=sk-x"}, "must not carry credentials, a query"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := runchannel.Open(context.Background(), &engine.Task{}, runchannel.Options{Binary: testBinary(t), Upstreams: []runchannel.Upstream{tc.up}})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "sk-x") {
				t.Errorf("err = %v, want %q and no key", err, tc.want)
			}
		})
	}
	dup := []runchannel.Upstream{{Name: "a", BaseURL: "https://x"}, {Name: "a", BaseURL: "https://y"}}
	if _, err := runchannel.Open(context.Background(), &engine.Task{}, runchannel.Options{Binary: testBinary(t), Upstreams: dup}); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("duplicate: err = %v", err)
	}
}

// Streams one after the other, each request with a body and each event
// read before the next is written, all arrive whole: the proxy never cuts
// a stream in the middle (it did when the server closed the request's
// body at the answer's first flush, racing the transport's read of it).
func TestProxyStreamsOneAfterAnother(t *testing.T) {
	const streams, events = 200, 10
	next := make(chan struct{})
	// The provider answers before it has read the request, as a provider
	// may: the widest window for the race.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for range events {
			io.WriteString(w, "data: {}\n\n")
			if rc.Flush() != nil {
				return
			}
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	}))
	defer up.Close()
	s := open(t, &engine.Task{}, runchannel.Options{Upstreams: upstreamsAt(up.URL)})
	hc := unixClient(s.Socket())
	body := `{"stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 64<<10) + `"}]}`
	for i := range streams {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a failure guard, not a wait
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/model/anthropic/v1/messages", strings.NewReader(body))
		req.Header.Set("X-Api-Key", s.Key())
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(res.Body)
		for j := range events {
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					t.Fatalf("stream %d, event %d: %v (the stream was cut)", i, j, err)
				}
				if line == "\n" {
					break
				}
			}
			select {
			case next <- struct{}{}:
			case <-ctx.Done():
				t.Fatalf("stream %d, event %d: the provider's handler is gone (its connection was cut)", i, j)
			}
		}
		io.Copy(io.Discard, rd)
		res.Body.Close()
		cancel()
	}
}
