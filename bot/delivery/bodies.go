package delivery

import (
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The bounds of Bodies by default (BodyOptions' zero values).
const (
	// DefaultBodyBytes is the most the bodies being read hold at once.
	// It leaves room for one body of GitHub's largest (25 MiB) beside the
	// chunks kept for bodies starting (an eighth of the pool).
	DefaultBodyBytes = 32 << 20
	// DefaultBodies is how many bodies are read at once.
	DefaultBodies = 1024
	// DefaultBodyTimeout is how long one body may take to arrive.
	DefaultBodyTimeout = 10 * time.Second
	// DefaultChunk is the size of the chunks bodies are read into: most
	// webhook deliveries fit one.
	DefaultChunk = 16 << 10
)

// waitBuffer is what a body arriving holds outside the pool: its bytes
// gather there until they fill it (or the body ends), and only then take a
// chunk, so a client trickling a few bytes holds no chunk at all.
const waitBuffer = 512

// BodyOptions bound Bodies. A zero field means its default.
type BodyOptions struct {
	// Bytes is the most the bodies being read hold at once, in chunks:
	// 0 means DefaultBodyBytes. Beyond it a body is refused with 503.
	Bytes int64
	// Bodies is how many bodies are read at once; 0 means DefaultBodies.
	// A request beyond it is refused with 503 before its body is read.
	Bodies int
	// Timeout is how long a body may take to arrive, from the end of its
	// headers; 0 means DefaultBodyTimeout. A body slower is answered 408.
	Timeout time.Duration
	// Chunk is the size of a chunk; 0 means DefaultChunk.
	Chunk int
}

// Bodies is where intakes read the bodies of requests whose signature
// cannot be checked yet, since it covers the body: every such body is
// read into fixed-size chunks lent by this one pool, which bounds the
// bytes held across all the requests still being read, of every channel,
// and the number of those requests. A body that cannot get room is
// refused at once and holds nothing. Chunks are reused; the pool never
// allocates more than its bound, and keeps what it allocated.
//
// It is also a prometheus.Collector of its bounds and use.
type Bodies struct {
	chunk   int
	total   int // chunks the pool may lend
	reserve int // chunks kept for the first chunk of a body
	slots   int
	timeout time.Duration

	mu      sync.Mutex
	free    [][]byte
	lent    int
	peak    int
	reading int
	refused map[string]float64
	// changed, when a test waits for bodies to be held, is closed at the
	// next change.
	changed chan struct{}
}

// NewBodies returns a pool with the bounds of opts.
func NewBodies(opts BodyOptions) *Bodies {
	chunk := opts.Chunk
	if chunk <= 0 {
		chunk = DefaultChunk
	}
	bytes := opts.Bytes
	if bytes <= 0 {
		bytes = DefaultBodyBytes
	}
	b := &Bodies{chunk: chunk, total: max(1, int(bytes/int64(chunk))), slots: opts.Bodies, timeout: opts.Timeout,
		refused: map[string]float64{}}
	if b.slots <= 0 {
		b.slots = DefaultBodies
	}
	if b.timeout <= 0 {
		b.timeout = DefaultBodyTimeout
	}
	// A body's second chunk and later may not take the last eighth: while
	// large bodies fill the pool, small ones (a delivery is a chunk) still
	// find room.
	b.reserve = b.total / 8
	return b
}

// BodyStats is what a pool holds at a moment.
type BodyStats struct {
	// Held is the bytes of the chunks lent to bodies being read; Peak the
	// most held at once since the pool was made; Limit the bound.
	Held, Peak, Limit int64
	// Reading is the number of bodies being read.
	Reading int
	// Refused counts the bodies refused, by reason: "bodies" (too many at
	// once), "memory" (no room), "timeout", "too_large".
	Refused map[string]int
}

// Stats returns what the pool holds now.
func (b *Bodies) Stats() BodyStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := BodyStats{Held: int64(b.lent * b.chunk), Peak: int64(b.peak * b.chunk), Limit: int64(b.total * b.chunk), Reading: b.reading,
		Refused: map[string]int{}}
	for k, v := range b.refused {
		s.Refused[k] = int(v)
	}
	return s
}

// changedLocked tells the waiter of a change, if any.
func (b *Bodies) changedLocked() {
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// changes returns a channel closed at the next change.
func (b *Bodies) changes() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

func (b *Bodies) refuse(reason string) {
	b.mu.Lock()
	b.refused[reason]++
	b.changedLocked()
	b.mu.Unlock()
}

// errBusy is a body that found no room in the pool; errTooLarge a body
// past the intake's limit.
var (
	errBusy     = errors.New("no room for the body")
	errTooLarge = errors.New("the body is too large")
)

// chunks is the number of chunks n bytes take.
func (b *Bodies) chunks(n int64) int64 { return (n + int64(b.chunk) - 1) / int64(b.chunk) }

// admit takes a slot for a body declaring length bytes (-1: unknown). A
// declared length that cannot find room now is refused at once, unread.
func (b *Bodies) admit(length int64) (ok bool, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reading >= b.slots {
		return false, "bodies"
	}
	if length > 0 && !b.fitsLocked(b.chunks(length)) {
		return false, "memory"
	}
	b.reading++
	b.changedLocked()
	return true, ""
}

// fitsLocked reports whether a body of n chunks would find room now.
func (b *Bodies) fitsLocked(n int64) bool {
	if n <= 1 {
		return b.lent < b.total
	}
	return int64(b.lent)+n <= int64(b.total-b.reserve)
}

// take lends a chunk to a body holding held chunks already, or reports
// that there is no room.
func (b *Bodies) take(held int) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := b.total - b.reserve
	if held == 0 {
		limit = b.total
	}
	if b.lent >= limit {
		return nil, false
	}
	b.lent++
	b.peak = max(b.peak, b.lent)
	b.changedLocked()
	if n := len(b.free); n > 0 {
		c := b.free[n-1]
		b.free = b.free[:n-1]
		return c[:0], true
	}
	return make([]byte, 0, b.chunk), true
}

// release gives back a body's chunks and its slot.
func (b *Bodies) release(chunks [][]byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range chunks {
		b.free = append(b.free, c[:0])
	}
	b.lent -= len(chunks)
	b.reading--
	b.changedLocked()
}

// body is a body read into the pool's chunks.
type body struct {
	chunks [][]byte
	n      int64
}

// bytes returns the body in one slice, a copy.
func (bd *body) bytes() []byte {
	out := make([]byte, 0, bd.n)
	for _, c := range bd.chunks {
		out = append(out, c...)
	}
	return out
}

// read reads r, a body admitted, into chunks, writing each byte to sig as
// it arrives, up to limit bytes. On an error the chunks taken so far are
// in the body returned, for the caller to release with the slot.
func (b *Bodies) read(r io.Reader, sig io.Writer, limit int64) (*body, error) {
	bd := &body{}
	var wait [waitBuffer]byte
	waiting := 0
	// flush moves the bytes waiting into the last chunk's room and new
	// chunks.
	flush := func() bool {
		for done := 0; done < waiting; {
			cur := bd.last()
			if cur == nil || len(cur) == cap(cur) {
				c, ok := b.take(len(bd.chunks))
				if !ok {
					return false
				}
				bd.chunks = append(bd.chunks, c)
				cur = c
			}
			n := copy(cur[len(cur):cap(cur)], wait[done:waiting])
			bd.chunks[len(bd.chunks)-1] = cur[:len(cur)+n]
			done += n
		}
		waiting = 0
		return true
	}
	for {
		// The next bytes go to the last chunk while it has room, else they
		// wait for a chunk.
		cur := bd.last()
		direct := waiting == 0 && cur != nil && len(cur) < cap(cur)
		buf := wait[waiting:]
		if direct {
			buf = cur[len(cur):cap(cur)]
		}
		n, err := r.Read(buf)
		sig.Write(buf[:n])
		bd.n += int64(n)
		if bd.n > limit {
			return bd, errTooLarge
		}
		if direct {
			bd.chunks[len(bd.chunks)-1] = cur[:len(cur)+n]
		} else {
			waiting += n
		}
		end := errors.Is(err, io.EOF)
		if (waiting == len(wait) || end) && !flush() {
			return bd, errBusy
		}
		if end {
			return bd, nil
		}
		if err != nil {
			return bd, err
		}
	}
}

func (bd *body) last() []byte {
	if len(bd.chunks) == 0 {
		return nil
	}
	return bd.chunks[len(bd.chunks)-1]
}

var (
	heldDesc = prometheus.NewDesc("iterion_intake_body_bytes_held",
		"Bytes held by webhook bodies being read, before their signature is checked.", nil, nil)
	peakDesc = prometheus.NewDesc("iterion_intake_body_bytes_peak",
		"The most bytes webhook bodies being read held at once since the start.", nil, nil)
	limitDesc = prometheus.NewDesc("iterion_intake_body_bytes_limit",
		"The most bytes webhook bodies being read may hold at once.", nil, nil)
	readingDesc = prometheus.NewDesc("iterion_intake_bodies_reading",
		"Webhook bodies being read.", nil, nil)
	slotsDesc = prometheus.NewDesc("iterion_intake_bodies_limit",
		"The most webhook bodies read at once.", nil, nil)
	refusedDesc = prometheus.NewDesc("iterion_intake_bodies_refused_total",
		"Webhook bodies refused before their signature was checked, by reason: bodies (too many at once), memory (no room), timeout, too_large.",
		[]string{"reason"}, nil)
)

// refusalReasons are the reasons counted, each exported from the start.
var refusalReasons = []string{"bodies", "memory", "timeout", "too_large"}

// Describe implements prometheus.Collector.
func (b *Bodies) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{heldDesc, peakDesc, limitDesc, readingDesc, slotsDesc, refusedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (b *Bodies) Collect(ch chan<- prometheus.Metric) {
	s := b.Stats()
	ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(s.Held))
	ch <- prometheus.MustNewConstMetric(peakDesc, prometheus.GaugeValue, float64(s.Peak))
	ch <- prometheus.MustNewConstMetric(limitDesc, prometheus.GaugeValue, float64(s.Limit))
	ch <- prometheus.MustNewConstMetric(readingDesc, prometheus.GaugeValue, float64(s.Reading))
	ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(b.slots))
	for _, r := range refusalReasons {
		ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(s.Refused[r]), r)
	}
}

var _ prometheus.Collector = (*Bodies)(nil)

// sizeText writes n bytes as people read them: 25 MiB, 512 KiB, 100 bytes.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
