package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/internal/fakegithub"
)

// The slow-clients load tool (BENCHMARKS.md, "Slow webhook clients"). It
// is a measurement, not a test: it runs only with -slowload.
var (
	slowLoad        = flag.Bool("slowload", false, "run TestSlowClientsLoad, the slow-clients load against serve in a child process")
	slowLoadBin     = flag.String("slowload.bin", "", "the iterion binary to run as serve (default: this test binary, as the program)")
	slowLoadClients = flag.Int("slowload.clients", 500, "slow clients")
	slowLoadEvery   = flag.Duration("slowload.every", 2*time.Second, "each slow client sends -slowload.bytes this often")
	slowLoadBytes   = flag.Int("slowload.bytes", 1, "what each slow client sends at a time")
	slowLoadMode    = flag.String("slowload.mode", "body", "body: headers at once, then the body a byte at a time; request: the headers too")
)

// rssKB reads a process's resident set (VmRSS) and its peak (VmHWM), in
// KiB, from /proc.
func rssKB(t *testing.T, pid int) (rss, hwm int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss, _ = strconv.Atoi(f[1])
		case "VmHWM:":
			hwm, _ = strconv.Atoi(f[1])
		}
	}
	return rss, hwm
}

// slowOutcome is how serve ended one slow client: its answer ("408", or
// "closed" when it closed without one) and when, from the connection.
type slowOutcome struct {
	answer string
	after  time.Duration
}

// TestSlowClientsLoad starts serve (with the GitHub App, on the fake
// GitHub) in a child process, opens -slowload.clients connections to its
// webhook endpoint that each send -slowload.bytes (one) every
// -slowload.every (2 s) of a 100,000-byte body with a wrong signature, and
// meanwhile sends a signed delivery every 200 ms. It reports serve's RSS
// before and at its peak (from /proc), when and how each slow client was
// cut, and how the signed deliveries fared.
//
//	go build -o /tmp/iterion ./cmd/iterion
//	go test ./cmd/iterion -run TestSlowClientsLoad -slowload -slowload.bin /tmp/iterion -v
func TestSlowClientsLoad(t *testing.T) {
	if !*slowLoad {
		t.Skip("a load measurement: run it with -slowload (see BENCHMARKS.md)")
	}
	h := newGHHarness(t, nil)
	bin := *slowLoadBin
	if bin == "" {
		bin = os.Args[0]
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--store-dir", h.store)
	cmd.Dir = t.TempDir()
	cmd.Env = childEnv(h.env...)
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	h.base = listenAddr(t, out)
	addr := strings.TrimPrefix(h.base, "http://")
	pid := cmd.Process.Pid
	// One signed delivery first, so what it allocates once is in "before".
	h.comment("ana", "/iterion help")
	rssBefore, _ := rssKB(t, pid)

	request := fmt.Sprintf("POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: slow\r\n"+
		"X-Hub-Signature-256: sha256=%s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", strings.Repeat("0", 64))
	n := *slowLoadClients
	outcomes := make([]slowOutcome, n)
	var clients sync.WaitGroup
	start := time.Now()
	for i := range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		defer conn.Close()
		opened := time.Now()
		rest := []byte(strings.Repeat(" ", 100_000))
		if *slowLoadMode == "body" {
			if _, err := io.WriteString(conn, request); err != nil {
				t.Fatal(err)
			}
		} else {
			rest = append([]byte(request), rest...)
		}
		// The sender trickles until the connection is cut; the reader
		// records how it was.
		stop := make(chan struct{})
		clients.Go(func() {
			tick := time.NewTicker(*slowLoadEvery)
			defer tick.Stop()
			for len(rest) > 0 {
				k := min(len(rest), *slowLoadBytes)
				if _, err := conn.Write(rest[:k]); err != nil {
					return
				}
				rest = rest[k:]
				select {
				case <-tick.C:
				case <-stop:
					return
				}
			}
		})
		clients.Go(func() {
			defer close(stop)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			o := slowOutcome{answer: "closed", after: time.Since(opened)}
			if err == nil {
				o.answer = strconv.Itoa(resp.StatusCode)
			}
			outcomes[i] = o
			conn.Close()
		})
	}
	opened := time.Since(start)

	// Signed deliveries every 200 ms until every slow client is cut, and
	// RSS sampled as they go.
	done := make(chan struct{})
	go func() { clients.Wait(); close(done) }()
	payload := commentPayload(1, "ana", "hello")
	var lat []time.Duration
	statuses := map[int]int{}
	maxRSS := rssBefore
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	watchdog := time.NewTimer(3 * time.Minute)
	defer watchdog.Stop()
	for i := 0; ; i++ {
		select {
		case <-done:
		case <-watchdog.C:
			t.Fatalf("slow clients still held after 3 minutes")
		case <-tick.C:
			req, _ := http.NewRequest("POST", h.base+"/webhooks/github", bytes.NewReader(payload))
			req.Header.Set("X-GitHub-Event", "issue_comment")
			req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("signed-%d", i))
			req.Header.Set("X-Hub-Signature-256", fakegithub.Sign(h.secret, payload))
			t0 := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses[0]++
			} else {
				resp.Body.Close()
				statuses[resp.StatusCode]++
				lat = append(lat, time.Since(t0))
			}
			if rss, _ := rssKB(t, pid); rss > maxRSS {
				maxRSS = rss
			}
			continue
		}
		break
	}
	_, hwm := rssKB(t, pid)
	rssAfter, _ := rssKB(t, pid)

	answers := map[string]int{}
	var cut []time.Duration
	for _, o := range outcomes {
		answers[o.answer]++
		cut = append(cut, o.after)
	}
	slices.Sort(cut)
	slices.Sort(lat)
	pct := func(d []time.Duration, p int) time.Duration {
		if len(d) == 0 {
			return 0
		}
		return d[min(len(d)-1, len(d)*p/100)].Round(time.Millisecond)
	}
	t.Logf("%d slow clients (%s mode, %d bytes every %s), opened in %s", n, *slowLoadMode, *slowLoadBytes, *slowLoadEvery, opened.Round(time.Millisecond))
	t.Logf("RSS: %d MiB before, %d MiB at most while sampled (+%d MiB), VmHWM %d MiB, %d MiB after",
		rssBefore>>10, maxRSS>>10, (maxRSS-rssBefore)>>10, hwm>>10, rssAfter>>10)
	t.Logf("cut: %v; first after %s, median %s, last %s", answers, cut[0].Round(time.Millisecond), pct(cut, 50), cut[len(cut)-1].Round(time.Millisecond))
	t.Logf("signed deliveries meanwhile: %v (0: no answer); latency p50 %s, p99 %s, max %s", statuses, pct(lat, 50), pct(lat, 99), pct(lat, 100))
	sent := 0
	for _, c := range statuses {
		sent += c
	}
	if statuses[http.StatusAccepted] != sent || sent == 0 {
		t.Errorf("signed deliveries refused under the slow clients: %v", statuses)
		t.Logf("serve's log:\n%s", logs.String())
	}
}
