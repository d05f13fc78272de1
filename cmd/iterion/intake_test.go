package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// slowWebhook is an unauthenticated client of serve's webhook endpoint
// that sends its headers (with a signature that is not the secret's), and
// then its body as slowly as the caller drives it.
type slowWebhook struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
}

// openWebhook sends the headers of a webhook declaring length bytes of
// body. With expect, it asks for 100 Continue and waits for it: net/http
// sends it when the handler starts reading the body, so the body is then
// held by the intake.
func openWebhook(t testing.TB, base string, id string, length int, expect bool) *slowWebhook {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: %s\r\n"+
		"X-Hub-Signature-256: sha256=%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", id, strings.Repeat("0", 64), length)
	if expect {
		head += "Expect: 100-continue\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	c := &slowWebhook{t: t, conn: conn, br: bufio.NewReader(conn)}
	if expect {
		if resp := c.answer(); resp.StatusCode != http.StatusContinue {
			t.Fatalf("webhook %s: %d, want 100 Continue", id, resp.StatusCode)
		}
	}
	return c
}

func (c *slowWebhook) send(n int) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, strings.Repeat(" ", n)); err != nil {
		c.t.Fatal(err)
	}
}

// answer reads serve's next response on the connection.
func (c *slowWebhook) answer() *http.Response {
	c.t.Helper()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// Many slow unauthenticated clients hold webhook bodies while signed
// deliveries keep being taken and handled; the bodies read at once are
// capped (the next is refused at once with 503, and so would a signed
// one be), a body that cannot have room is refused at once, and each slow
// body is cut with 408 at webhooks.body_timeout, after which nothing is
// held. /metrics shows it all.
func TestServeGitHubSlowBodies(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, nil)
	cfg := filepath.Join(t.TempDir(), "serve.yml")
	// 1 MiB is 64 chunks, the last 8 kept for bodies starting.
	if err := os.WriteFile(cfg, []byte("webhooks:\n  memory_mb: 1\n  bodies: 40\n  body_timeout: 5s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.env = append(h.env, "ITERION_CONFIG="+cfg)
	h.start()

	// 30 slow clients, each holding a chunk (past the 512 bytes a body
	// waits in without one).
	var slow []*slowWebhook
	for i := range 30 {
		c := openWebhook(t, h.base, fmt.Sprintf("slow-%d", i), 100_000, true)
		c.send(600)
		slow = append(slow, c)
	}
	// Signed deliveries are taken and handled meanwhile.
	for range 3 {
		id := h.comment("ana", "/iterion help")
		h.fake.WaitFor(60*time.Second, "the reply to the help comment", func() bool {
			return len(h.fake.BotComments(7, fmt.Sprintf("iterion:comment-%d ", id))) == 1
		})
	}
	if got := h.metric("iterion_intake_bodies_reading"); got != "30" {
		t.Errorf("bodies being read after the signed deliveries: %s, want the 30 slow ones", got)
	}
	// A body declaring more than the pool has left is refused at once.
	big := openWebhook(t, h.base, "big", 2<<20, false)
	checkRefused(t, "a 2 MiB body beside a 1 MiB pool", big.answer(), http.StatusServiceUnavailable)

	// 10 more fill the 40 bodies read at once: the next is refused at
	// once, unread, whoever sends it.
	for i := range 10 {
		slow = append(slow, openWebhook(t, h.base, fmt.Sprintf("slow-%d", 30+i), 100_000, true))
	}
	extra := openWebhook(t, h.base, "extra", 100_000, false)
	checkRefused(t, "a body past webhooks.bodies", extra.answer(), http.StatusServiceUnavailable)
	req, _ := http.NewRequest("POST", h.base+"/webhooks/github", strings.NewReader("{}"))
	req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a delivery while 40 bodies are read: %v %v, want 503", resp, err)
	} else {
		resp.Body.Close()
	}

	// Each slow body is cut at its deadline.
	for i, c := range slow {
		checkRefused(t, fmt.Sprintf("slow body %d", i), c.answer(), http.StatusRequestTimeout)
	}
	for name, want := range map[string]string{
		"iterion_intake_body_bytes_held":                          "0",
		"iterion_intake_bodies_reading":                           "0",
		`iterion_intake_bodies_refused_total{reason="timeout"}`:   "40",
		`iterion_intake_bodies_refused_total{reason="bodies"}`:    "2",
		`iterion_intake_bodies_refused_total{reason="memory"}`:    "1",
		"iterion_intake_body_bytes_limit":                         "1.048576e+06",
		`iterion_intake_bodies_refused_total{reason="too_large"}`: "0",
		"iterion_intake_bodies_limit":                             "40",
	} {
		if got := h.metric(name); got != want {
			t.Errorf("%s = %q, want %s", name, got, want)
		}
	}
	peak, err := strconv.ParseFloat(h.metric("iterion_intake_body_bytes_peak"), 64)
	if err != nil || peak <= 0 || peak > 1<<20 {
		t.Errorf("iterion_intake_body_bytes_peak = %v (%v), want some, within the 1 MiB limit", peak, err)
	}
	// And a signed delivery is taken again.
	id := h.comment("ana", "/iterion help")
	h.fake.WaitFor(60*time.Second, "the reply to the last help comment", func() bool {
		return len(h.fake.BotComments(7, fmt.Sprintf("iterion:comment-%d ", id))) == 1
	})
}

// checkRefused checks a refusal that closes its connection.
func checkRefused(t *testing.T, what string, resp *http.Response, status int) {
	t.Helper()
	if resp.StatusCode != status || !resp.Close {
		t.Errorf("%s: %d (closing: %v), want %d closing the connection", what, resp.StatusCode, resp.Close, status)
	}
	if status == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		t.Errorf("%s: 503 without Retry-After", what)
	}
}
