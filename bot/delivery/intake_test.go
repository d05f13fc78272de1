package delivery_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/delivery"
)

// testChannel is a channel as GitHub's and Slack's are shaped: an
// HMAC-SHA256 of "v0:" and the body in X-Sig (hex), the delivery id in
// X-Id. A body {"challenge": …} is answered in the request, "ignore" is
// acknowledged unstored, "stored-answer" is stored and answered, "bad" is
// refused, "boom" fails.
type testChannel struct{}

var secret = []byte("s3cret")

func sign(body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("v0:"))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

type testSig struct {
	mac  hash.Hash
	want []byte
}

func (s *testSig) Write(p []byte) (int, error) { return s.mac.Write(p) }

func (s *testSig) Verify() error {
	if !hmac.Equal(s.mac.Sum(nil), s.want) {
		return delivery.Refuse(http.StatusUnauthorized, "bad X-Sig")
	}
	return nil
}

func (testChannel) Verifier(h http.Header) (delivery.Verifier, error) {
	want, err := hex.DecodeString(h.Get("X-Sig"))
	if err != nil || len(want) == 0 {
		return nil, delivery.Refuse(http.StatusUnauthorized, "no X-Sig")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("v0:"))
	return &testSig{mac: mac, want: want}, nil
}

func (testChannel) Accept(_ context.Context, h http.Header, body []byte) (delivery.Outcome, error) {
	switch s := string(body); {
	case strings.HasPrefix(s, `{"challenge": `):
		return delivery.Outcome{Response: &delivery.Response{ContentType: "text/plain", Body: []byte(strings.Trim(s[len(`{"challenge": `):], `"}`))}}, nil
	case s == "ignore":
		return delivery.Outcome{}, nil
	case s == "bad":
		return delivery.Outcome{}, delivery.Refuse(http.StatusBadRequest, "the payload is bad")
	case s == "boom":
		return delivery.Outcome{}, errors.New("boom")
	}
	d := &delivery.Delivery{Source: "test", ID: h.Get("X-Id"), Event: "e", Payload: body}
	if string(body) == "stored-answer" {
		return delivery.Outcome{Delivery: d, Response: &delivery.Response{Status: http.StatusOK, ContentType: "application/json", Body: []byte(`{}`)}}, nil
	}
	return delivery.Outcome{Delivery: d}, nil
}

// memRecorder stores deliveries in memory, deduplicated; fail makes the
// next writes fail, block holds them until it is closed.
type memRecorder struct {
	mu    sync.Mutex
	got   map[string][]byte
	fail  bool
	block chan struct{}
}

func (m *memRecorder) RecordDelivery(ctx context.Context, d delivery.Delivery) (bool, error) {
	m.mu.Lock()
	block := m.block
	m.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return false, errors.New("disk full")
	}
	if _, ok := m.got[d.ID]; ok {
		return false, nil
	}
	if m.got == nil {
		m.got = map[string][]byte{}
	}
	m.got[d.ID] = d.Payload
	return true, nil
}

func (m *memRecorder) stored() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.got)
}

type intakeWorld struct {
	rec    *memRecorder
	bodies *delivery.Bodies
	srv    *httptest.Server
	addr   string
	woken  atomic.Int32
}

func newIntakeWorld(t *testing.T, bo delivery.BodyOptions, maxBody int64) *intakeWorld {
	t.Helper()
	w := &intakeWorld{rec: &memRecorder{}, bodies: delivery.NewBodies(bo)}
	in := delivery.NewIntake(testChannel{}, delivery.IntakeOptions{Store: w.rec, Bodies: w.bodies, MaxBody: maxBody,
		Wake: func() { w.woken.Add(1) }})
	w.srv = httptest.NewServer(in)
	t.Cleanup(w.srv.Close)
	w.addr = strings.TrimPrefix(w.srv.URL, "http://")
	return w
}

// post sends a signed body (sig "" signs it) and returns the answer, read.
func (w *intakeWorld) post(t *testing.T, id string, body []byte, sig string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, w.srv.URL, bytes.NewReader(body))
	req.Header.Set("X-Id", id)
	if sig == "" {
		sig = sign(body)
	}
	req.Header.Set("X-Sig", sig)
	resp, err := w.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestIntakeStoresThenAcknowledges(t *testing.T) {
	w := newIntakeWorld(t, delivery.BodyOptions{}, 0)
	tests := []struct {
		name     string
		id, body string
		sig      string
		want     int
		wantBody string
		stored   int
	}{
		{name: "signed: stored, then 202", id: "d-1", body: "hello", want: http.StatusAccepted, stored: 1},
		{name: "redelivery: 202, no second effect", id: "d-1", body: "hello", want: http.StatusAccepted, stored: 1},
		{name: "bad signature", id: "d-2", body: "hello", sig: sign([]byte("other")), want: http.StatusUnauthorized, wantBody: `{"error":"bad X-Sig"}`, stored: 1},
		{name: "no signature, refused unread", id: "d-3", body: "hello", sig: "-", want: http.StatusUnauthorized, wantBody: `{"error":"no X-Sig"}`, stored: 1},
		{name: "answered in the request", id: "d-4", body: `{"challenge": "c-42"}`, want: http.StatusOK, wantBody: "c-42", stored: 1},
		{name: "stored and answered", id: "d-5", body: "stored-answer", want: http.StatusOK, wantBody: "{}", stored: 2},
		{name: "ignored: 202, unstored", id: "d-6", body: "ignore", want: http.StatusAccepted, stored: 2},
		{name: "refused by the channel", id: "d-7", body: "bad", want: http.StatusBadRequest, wantBody: `{"error":"the payload is bad"}`, stored: 2},
		{name: "the channel fails", id: "d-8", body: "boom", want: http.StatusInternalServerError, wantBody: `{"error":"internal error; redeliver it"}`, stored: 2},
		{name: "empty body", id: "d-9", body: "", want: http.StatusAccepted, stored: 3},
	}
	for _, tc := range tests {
		resp, body := w.post(t, tc.id, []byte(tc.body), tc.sig)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
		if got := strings.TrimSpace(body); got != tc.wantBody {
			t.Errorf("%s: body %q, want %q", tc.name, got, tc.wantBody)
		}
		if tc.want == http.StatusAccepted && resp.ContentLength != 0 {
			t.Errorf("%s: Content-Length %d, want 0", tc.name, resp.ContentLength)
		}
		if got := w.rec.stored(); got != tc.stored {
			t.Errorf("%s: %d stored, want %d", tc.name, got, tc.stored)
		}
	}
	// A store that fails: 503, for the sender to deliver it again.
	w.rec.mu.Lock()
	w.rec.fail = true
	w.rec.mu.Unlock()
	if resp, body := w.post(t, "d-10", []byte("hello"), ""); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "redeliver") {
		t.Errorf("store failing: %d %s, want 503 asking for a redelivery", resp.StatusCode, body)
	}
	// Closed, the server has finished every handler: each new delivery
	// woke the worker once, after its acknowledgement.
	w.srv.Close()
	if n := w.woken.Load(); n != 3 {
		t.Errorf("the worker was woken %d times, want 3 (once per new delivery)", n)
	}
	if s := w.bodies.Stats(); s.Held != 0 || s.Reading != 0 {
		t.Errorf("after the requests the pool holds %+v", s)
	}
}

// The acknowledgement is on the wire before the worker is woken: the
// client reads its 202 while the wake-up still blocks.
func TestIntakeAcknowledgesBeforeWaking(t *testing.T) {
	rec := &memRecorder{}
	release := make(chan struct{})
	in := delivery.NewIntake(testChannel{}, delivery.IntakeOptions{Store: rec, Wake: func() { <-release }})
	srv := httptest.NewServer(in)
	defer srv.Close()
	defer close(release)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("hello"))
	req.Header.Set("X-Id", "d-1")
	req.Header.Set("X-Sig", sign([]byte("hello")))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || rec.stored() != 1 {
		t.Errorf("status %d with %d stored, want 202 after the store", resp.StatusCode, rec.stored())
	}
}

// rawConn is a client writing its request by hand, as slowly as the test
// drives it.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

// open sends a request's headers; length < 0 means a chunked body. The
// signature is the one of signed (nil: no signature at all).
func open(t *testing.T, addr string, length int, signed []byte) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := "POST / HTTP/1.1\r\nHost: x\r\nX-Id: raw\r\n"
	if signed != nil {
		head += "X-Sig: " + sign(signed) + "\r\n"
	}
	if length >= 0 {
		head += fmt.Sprintf("Content-Length: %d\r\n", length)
	} else {
		head += "Transfer-Encoding: chunked\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return &rawConn{t: t, conn: conn, br: bufio.NewReader(conn)}
}

// send writes n bytes of the body ('a's), as one chunk of a chunked body
// when chunked.
func (c *rawConn) send(n int, chunked bool) {
	c.t.Helper()
	data := strings.Repeat("a", n)
	if chunked {
		data = fmt.Sprintf("%x\r\n%s\r\n", n, data)
	}
	if _, err := io.WriteString(c.conn, data); err != nil {
		c.t.Fatal(err)
	}
}

// end ends a chunked body.
func (c *rawConn) end() {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, "0\r\n\r\n"); err != nil {
		c.t.Fatal(err)
	}
}

// answer reads the response.
func (c *rawConn) answer() *http.Response {
	c.t.Helper()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp
}

// refusedAndClosed checks a refusal that closes its connection.
func refusedAndClosed(t *testing.T, what string, resp *http.Response, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s: status %d, want %d", what, resp.StatusCode, status)
	}
	if !resp.Close {
		t.Errorf("%s: the connection is kept open", what)
	}
	if status == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		t.Errorf("%s: 503 without Retry-After", what)
	}
}

// The pool bounds the bytes held by bodies still being read, whatever
// their clients send: large bodies fill it to its last eighth, kept for
// bodies starting, so a signed delivery still finds room; a body that
// finds none is refused with 503 and gives back what it held; the bytes
// held never pass the bound.
func TestBodiesBoundTheBytesHeld(t *testing.T) {
	const kib = 1 << 10
	// 16 chunks of 1 KiB, the last 2 kept for first chunks.
	w := newIntakeWorld(t, delivery.BodyOptions{Bytes: 16 * kib, Chunk: kib}, 0)
	held := func(n int) func(delivery.BodyStats) bool {
		return func(s delivery.BodyStats) bool { return s.Held == int64(n*kib) }
	}
	l1 := open(t, w.addr, 8*kib, []byte("not this"))
	l1.send(7*kib, false)
	delivery.WaitBodies(t, w.bodies, "7 chunks held", held(7))
	// (Of unknown length: declaring 8 KiB, it would not fit beside l1's.)
	l2 := open(t, w.addr, -1, []byte("not this"))
	l2.send(7*kib, true)
	delivery.WaitBodies(t, w.bodies, "14 chunks held", held(14))

	// A body declaring more than is left is refused at once, unread.
	declared := open(t, w.addr, 2*kib, []byte("not this"))
	refusedAndClosed(t, "a body declaring 2 KiB with 2 chunks left", declared.answer(), http.StatusServiceUnavailable)

	// A body of unknown length gets its first chunk from the last eighth,
	// not its second: refused, and its chunk given back.
	l3 := open(t, w.addr, -1, []byte("not this"))
	l3.send(kib, true)
	delivery.WaitBodies(t, w.bodies, "15 chunks held", held(15))
	l3.send(kib, true)
	refusedAndClosed(t, "a large body past the bound", l3.answer(), http.StatusServiceUnavailable)
	delivery.WaitBodies(t, w.bodies, "l3's chunk given back", held(14))

	// Meanwhile signed deliveries are taken.
	for i := range 3 {
		if resp, body := w.post(t, fmt.Sprintf("signed-%d", i), []byte(`{"small": true}`), ""); resp.StatusCode != http.StatusAccepted {
			t.Errorf("a signed delivery beside large bodies: %d %s", resp.StatusCode, body)
		}
	}
	// The large bodies end, unsigned for what they are: refused, and
	// everything is given back. (l1's last KiB finds room once l2's
	// chunks are back.)
	l2.end()
	if resp := l2.answer(); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unsigned large body: %d, want 401", resp.StatusCode)
	}
	l1.send(kib, false)
	if resp := l1.answer(); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unsigned large body: %d, want 401", resp.StatusCode)
	}
	delivery.WaitBodies(t, w.bodies, "nothing held", func(s delivery.BodyStats) bool { return s.Held == 0 && s.Reading == 0 })
	s := w.bodies.Stats()
	if s.Peak > s.Limit || s.Peak != 15*kib {
		t.Errorf("peak %d bytes held, want 15 KiB, within the limit of %d", s.Peak, s.Limit)
	}
	if s.Refused["memory"] != 2 {
		t.Errorf("refused %v, want 2 for memory", s.Refused)
	}
	if w.rec.stored() != 3 {
		t.Errorf("%d stored, want the 3 signed deliveries", w.rec.stored())
	}
}

// A client trickling its body holds no chunk until it has sent enough to
// fill the small buffer a body waits in.
func TestBodiesTrickleHoldsNoChunk(t *testing.T) {
	w := newIntakeWorld(t, delivery.BodyOptions{}, 0)
	var slow []*rawConn
	for range 20 {
		c := open(t, w.addr, 1000, []byte("x"))
		for range 10 {
			c.send(1, false)
		}
		slow = append(slow, c)
	}
	delivery.WaitBodies(t, w.bodies, "20 bodies being read", func(s delivery.BodyStats) bool { return s.Reading == 20 })
	if s := w.bodies.Stats(); s.Held != 0 {
		t.Errorf("20 bodies of 10 bytes hold %d bytes of chunks, want none", s.Held)
	}
	for _, c := range slow {
		c.conn.Close()
	}
	delivery.WaitBodies(t, w.bodies, "nothing held", func(s delivery.BodyStats) bool { return s.Reading == 0 })
}

// At most Bodies bodies are read at once: the next request is refused at
// once with 503, unread, and a slot freed is taken again.
func TestBodiesCapTheBodiesRead(t *testing.T) {
	w := newIntakeWorld(t, delivery.BodyOptions{Bodies: 2}, 0)
	a := open(t, w.addr, 100, []byte("x"))
	a.send(1, false)
	b := open(t, w.addr, 100, []byte("x"))
	b.send(1, false)
	delivery.WaitBodies(t, w.bodies, "2 bodies being read", func(s delivery.BodyStats) bool { return s.Reading == 2 })
	c := open(t, w.addr, 100, []byte("x"))
	refusedAndClosed(t, "a third body", c.answer(), http.StatusServiceUnavailable)
	if resp, _ := w.post(t, "signed", []byte("hello"), ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a signed delivery while the bodies are taken: %d, want 503", resp.StatusCode)
	}
	a.conn.Close()
	delivery.WaitBodies(t, w.bodies, "a slot free", func(s delivery.BodyStats) bool { return s.Reading == 1 })
	if resp, body := w.post(t, "signed", []byte("hello"), ""); resp.StatusCode != http.StatusAccepted {
		t.Errorf("a signed delivery once a slot is free: %d %s", resp.StatusCode, body)
	}
	if s := w.bodies.Stats(); s.Refused["bodies"] != 2 {
		t.Errorf("refused %v, want 2 for bodies", s.Refused)
	}
}

// A body slower than the timeout is answered 408 and its connection
// closed, holding nothing after.
func TestBodiesTimeout(t *testing.T) {
	w := newIntakeWorld(t, delivery.BodyOptions{Timeout: 200 * time.Millisecond, Chunk: 1 << 10}, 0)
	c := open(t, w.addr, 4000, []byte("x"))
	c.send(2000, false) // holds chunks
	refusedAndClosed(t, "a body sent too slowly", c.answer(), http.StatusRequestTimeout)
	if _, err := c.br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("after the 408 the connection gave %v, want it closed", err)
	}
	if s := w.bodies.Stats(); s.Held != 0 || s.Reading != 0 || s.Refused["timeout"] != 1 {
		t.Errorf("after the timeout: %+v", s)
	}
}

// The body's deadline ends with the body: a store slower than it does not
// cut the request (net/http cancels a request's context when a read
// deadline passes after its body was read).
func TestBodiesTimeoutEndsWithTheBody(t *testing.T) {
	const timeout = 100 * time.Millisecond
	w := newIntakeWorld(t, delivery.BodyOptions{Timeout: timeout}, 0)
	w.rec.block = make(chan struct{})
	// The store is held past the deadline.
	stall := time.AfterFunc(3*timeout, func() { close(w.rec.block) })
	defer stall.Stop()
	if resp, body := w.post(t, "slow-store", []byte("hello"), ""); resp.StatusCode != http.StatusAccepted {
		t.Errorf("a store slower than the body's deadline: %d %s, want 202", resp.StatusCode, body)
	}
}

// A body larger than MaxBody is refused with 413: unread when its length
// says so, as soon as it passes the limit otherwise.
func TestBodiesTooLarge(t *testing.T) {
	w := newIntakeWorld(t, delivery.BodyOptions{}, 1000)
	declared := open(t, w.addr, 1001, []byte("x"))
	resp := declared.answer()
	refusedAndClosed(t, "a body declaring 1001 bytes", resp, http.StatusRequestEntityTooLarge)
	if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), "payload larger than 1000 bytes") {
		t.Errorf("413 body %q, want it to name the limit", b)
	}
	chunked := open(t, w.addr, -1, []byte("x"))
	chunked.send(600, true)
	chunked.send(600, true)
	refusedAndClosed(t, "a chunked body past 1000 bytes", chunked.answer(), http.StatusRequestEntityTooLarge)
	if resp, _ := w.post(t, "exact", bytes.Repeat([]byte("a"), 1000), ""); resp.StatusCode != http.StatusAccepted {
		t.Errorf("a body of exactly MaxBody: %d, want 202", resp.StatusCode)
	}
	delivery.WaitBodies(t, w.bodies, "nothing held", func(s delivery.BodyStats) bool { return s.Held == 0 && s.Reading == 0 })
	if s := w.bodies.Stats(); s.Refused["too_large"] != 2 {
		t.Errorf("refused %v, want 2 too large", s.Refused)
	}
}
