//go:build linux

package runchannel

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// paths are the three ways a request reaches the provider in the
// benchmarks: straight (the baseline), through the proxy on its socket, and
// through the forwarder on a loopback port and then the proxy, as a CLI in
// the sandbox does. The difference to direct is what the run channel adds.
type benchPath struct {
	name string
	url  string // the base URL the client uses
	key  string // the key it sends
	hc   *http.Client
}

func benchPaths(b *testing.B, upstream string) []benchPath {
	b.Helper()
	s, err := Open(context.Background(), &engine.Task{}, Options{Upstreams: []Upstream{{Name: Anthropic, BaseURL: upstream, Key: "sk-real", Auth: AuthAPIKey}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go forward(ln, s.Socket(), func(string, ...any) {})
	unix := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", s.Socket())
	}}}
	tcp := func() *http.Client { return &http.Client{Transport: &http.Transport{}} }
	return []benchPath{
		{"direct", upstream, "sk-real", tcp()},
		{"proxy", "http://x/model/anthropic", s.Key(), unix},
		{"forwarder+proxy", "http://" + ln.Addr().String() + "/model/anthropic", s.Key(), tcp()},
	}
}

func benchRequest(b *testing.B, p benchPath) *http.Response {
	req, _ := http.NewRequest(http.MethodPost, p.url+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("X-Api-Key", p.key)
	res, err := p.hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// BenchmarkModelRequest is one small non-streamed request and its answer,
// on a kept-alive connection.
func BenchmarkModelRequest(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
	}))
	defer up.Close()
	for _, p := range benchPaths(b, up.URL) {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				res := benchRequest(b, p)
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Fatalf("status %d", res.StatusCode)
				}
			}
		})
	}
}

// BenchmarkStreamedChunk is the latency of one SSE event: the provider
// writes the next event only when the client has read the previous one,
// so each event's time is its whole way through, not a throughput.
func BenchmarkStreamedChunk(b *testing.B) {
	const perStream = 100
	event := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"abcdefghijklmnop\"}}\n\n"
	next := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for range perStream {
			io.WriteString(w, event)
			rc.Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			case <-time.After(time.Minute):
				return
			}
		}
	}))
	defer up.Close()
	for _, p := range benchPaths(b, up.URL) {
		b.Run(p.name, func(b *testing.B) {
			chunks := 0
			for b.Loop() {
				res := benchRequest(b, p)
				rd := bufio.NewReader(res.Body)
				for range perStream {
					for {
						line, err := rd.ReadString('\n')
						if err != nil {
							b.Fatalf("chunk %d, status %d: %v %q", chunks, res.StatusCode, err, line)
						}
						if line == "\n" {
							break
						}
					}
					chunks++
					next <- struct{}{}
				}
				res.Body.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(chunks), "ns/chunk")
		})
	}
}

// BenchmarkOpenSession is what a node's start pays for its channel: the
// directory, the socket, the server, and Close.
func BenchmarkOpenSession(b *testing.B) {
	for b.Loop() {
		s, err := Open(context.Background(), &engine.Task{}, Options{Upstreams: []Upstream{}})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecWrapper is what sandbox-exec adds to a CLI's start: the
// iterion binary (here the test binary, which serves the same
// subcommand) with one forward, running /bin/true, against /bin/true
// alone.
func BenchmarkExecWrapper(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("true", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sandbox-exec true", func(b *testing.B) {
		for b.Loop() {
			port := freePortForBench(b)
			if out, err := exec.Command(exe, ExecCommand, "--forward", "127.0.0.1:"+port+"=/tmp/none.sock", "--", "/bin/true").CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
}

func freePortForBench(b *testing.B) string {
	p, err := freePort()
	if err != nil {
		b.Fatal(err)
	}
	return strconv.Itoa(p)
}
