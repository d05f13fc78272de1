package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"
)

// Recorder is what an intake needs of the store (Store.RecordDelivery).
type Recorder interface {
	RecordDelivery(ctx context.Context, d Delivery) (bool, error)
}

// Channel is one channel's side of an Intake: how its requests are
// authenticated, and what a request authenticated asks for. The intake
// owns the rest: the bounds on bodies, the durable write before the
// acknowledgement, and the worker's wake-up.
type Channel interface {
	// Verifier starts checking a request's signature from its headers,
	// before any of its body is read. A request the headers alone condemn
	// (no signature, a stale timestamp) is refused with a *Refusal and its
	// body is not read; any other error is an internal one (500).
	Verifier(h http.Header) (Verifier, error)
	// Accept says what to do with a request whose signature holds: store
	// a delivery, answer in the request, both, or nothing (the zero
	// Outcome: acknowledged and ignored). A request it refuses is a
	// *Refusal; any other error is an internal one (500). body is the
	// request's whole body, which the caller no longer uses.
	Accept(ctx context.Context, h http.Header, body []byte) (Outcome, error)
}

// Verifier checks one request's signature: the body is written to it as
// it arrives, then Verify says whether the signature covers it, nil or a
// *Refusal. (GitHub's HMAC is over the body; Slack's over a prefix from
// the headers, then the body.)
type Verifier interface {
	io.Writer
	Verify() error
}

// Outcome is what a channel makes of an authenticated request.
type Outcome struct {
	// Delivery, when set, is stored (deduplicated by Source and ID)
	// before anything is answered; a redelivery is answered the same and
	// has no second effect.
	Delivery *Delivery
	// Response, when set, is the answer, written once the delivery (if
	// any) is stored: Slack's url_verification challenge, or an
	// interaction answered in the request. nil means 202 with an empty
	// body.
	Response *Response
}

// Response is an answer a channel gives in the request.
type Response struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// ContentType is the body's type ("application/json").
	ContentType string
	Body        []byte
}

// Refusal is a request refused: its HTTP status, and a message for the
// people who sent it (GitHub shows it among the App's recent
// deliveries), naming what to fix.
type Refusal struct {
	Status  int
	Message string
	// Header holds headers to send with it (Retry-After).
	Header http.Header
}

// Refuse returns the refusal of a request with status and message.
func Refuse(status int, message string) *Refusal {
	return &Refusal{Status: status, Message: message}
}

func (r *Refusal) Error() string {
	return strconv.Itoa(r.Status) + " " + r.Message
}

// IntakeOptions configure an Intake. A zero optional field means the
// default it names.
type IntakeOptions struct {
	// Store keeps the deliveries; required.
	Store Recorder
	// Bodies is the pool the bodies are read into, to share with the
	// server's other intakes; nil means one of the intake's own with
	// BodyOptions' defaults.
	Bodies *Bodies
	// MaxBody is the largest body taken; a larger one is answered 413.
	// 0 means DefaultMaxBody.
	MaxBody int64
	// Wake tells the worker a new delivery is stored; it must not block.
	// nil means nobody is told.
	Wake func()
	// Log receives the intake's logs; nil means none.
	Log *slog.Logger
}

// DefaultMaxBody is GitHub's limit on a webhook payload, 25 MiB; Slack's
// requests are far smaller.
const DefaultMaxBody = 25 << 20

// Intake receives a channel's webhooks. It checks the signature as the
// body arrives, before anything of the body is parsed; stores the
// delivery the channel makes of it, synced, and only then acknowledges it
// (202, or the channel's in-request answer), so that nothing acknowledged
// is lost; then wakes the worker, which handles the stored deliveries. A
// delivery that cannot be stored is answered 503, for the sender to
// deliver it again.
//
// Bodies are read before their signature can be checked, so what a
// request may hold is bounded (see Bodies): a body larger than MaxBody is
// refused unread (413), one beyond the pool's bodies or bytes 503 with
// Retry-After, one slower than the pool's timeout 408; each of them
// closes its connection.
type Intake struct {
	ch      Channel
	store   Recorder
	bodies  *Bodies
	maxBody int64
	wake    func()
	log     *slog.Logger
}

// NewIntake returns the intake of ch.
func NewIntake(ch Channel, opts IntakeOptions) *Intake {
	in := &Intake{ch: ch, store: opts.Store, bodies: opts.Bodies, maxBody: opts.MaxBody, wake: opts.Wake, log: opts.Log}
	if in.bodies == nil {
		in.bodies = NewBodies(BodyOptions{})
	}
	if in.maxBody <= 0 {
		in.maxBody = DefaultMaxBody
	}
	if in.wake == nil {
		in.wake = func() {}
	}
	if in.log == nil {
		in.log = slog.New(slog.DiscardHandler)
	}
	return in
}

// retryAfter is the wait a refusal for want of room asks for: by then the
// bodies holding the room have been read or cut.
const retryAfter = "10"

func (in *Intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeRefusal(w, Refuse(http.StatusMethodNotAllowed, "webhooks are POSTed"))
		return
	}
	// A request refused before its body is read closes its connection:
	// its answer goes out at once (net/http would otherwise read what is
	// left of the body first, from a client that may be sending it
	// slowly).
	if r.ContentLength > in.maxBody {
		in.bodies.refuse("too_large")
		in.refuseUnread(w, Refuse(http.StatusRequestEntityTooLarge, "payload larger than "+sizeText(in.maxBody)))
		return
	}
	sig, err := in.ch.Verifier(r.Header)
	if err != nil {
		in.refuseUnread(w, in.refusal(err))
		return
	}
	if ok, reason := in.bodies.admit(r.ContentLength); !ok {
		in.bodies.refuse(reason)
		in.refuseUnread(w, busy())
		return
	}
	// The deadline bounds a slow body; the controller is absent only under
	// test recorders.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(in.bodies.timeout))
	bd, err := in.bodies.read(r.Body, sig, in.maxBody)
	var payload []byte
	if err == nil {
		// Read whole: what follows is bounded by the server, not the
		// client. (A deadline passing later would cancel the request's
		// context in net/http's background read.)
		_ = rc.SetReadDeadline(time.Time{})
		if err = sig.Verify(); err == nil {
			payload = bd.bytes()
		}
	}
	in.bodies.release(bd.chunks)
	if err != nil {
		in.refuseBody(w, err)
		return
	}
	out, err := in.ch.Accept(r.Context(), r.Header, payload)
	if err != nil {
		writeRefusal(w, in.refusal(err))
		return
	}
	fresh := false
	if d := out.Delivery; d != nil {
		fresh, err = in.store.RecordDelivery(r.Context(), *d)
		if err != nil {
			in.log.Error("storing a webhook delivery failed", "source", d.Source, "delivery", d.ID, "event", d.Event, "err", err)
			writeRefusal(w, Refuse(http.StatusServiceUnavailable, "the delivery could not be stored; redeliver it"))
			return
		}
		if !fresh {
			in.log.Info("webhook redelivered: already stored", "source", d.Source, "delivery", d.ID, "event", d.Event)
		}
	}
	// Acknowledged before the worker is woken: a delivery being handled
	// has always been answered. The body's length is set so that the
	// flush sends the whole response at once, not a chunked stream.
	if resp := out.Response; resp != nil {
		if resp.ContentType != "" {
			w.Header().Set("Content-Type", resp.ContentType)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(resp.Body)))
		w.WriteHeader(cmpStatus(resp.Status))
		_, _ = w.Write(resp.Body)
	} else {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusAccepted)
	}
	_ = rc.Flush()
	if fresh {
		in.wake()
	}
}

func cmpStatus(s int) int {
	if s == 0 {
		return http.StatusOK
	}
	return s
}

func busy() *Refusal {
	return &Refusal{Status: http.StatusServiceUnavailable, Message: "too many webhook bodies being read; redeliver it",
		Header: http.Header{"Retry-After": {retryAfter}}}
}

// refusal is the Refusal of a channel's error: an error that is none is
// an internal one, logged, and the sender told no more.
func (in *Intake) refusal(err error) *Refusal {
	var ref *Refusal
	if errors.As(err, &ref) {
		return ref
	}
	in.log.Error("a webhook could not be taken in", "err", err)
	return Refuse(http.StatusInternalServerError, "internal error; redeliver it")
}

// refuseBody answers a body that could not be read whole or whose
// signature does not hold.
func (in *Intake) refuseBody(w http.ResponseWriter, err error) {
	var ref *Refusal
	switch {
	case errors.As(err, &ref):
		// Read whole: the connection may serve the next request.
		writeRefusal(w, ref)
	case errors.Is(err, errBusy):
		in.bodies.refuse("memory")
		in.refuseUnread(w, busy())
	case errors.Is(err, errTooLarge):
		in.bodies.refuse("too_large")
		in.refuseUnread(w, Refuse(http.StatusRequestEntityTooLarge, "payload larger than "+sizeText(in.maxBody)))
	case errors.Is(err, os.ErrDeadlineExceeded):
		in.bodies.refuse("timeout")
		in.refuseUnread(w, Refuse(http.StatusRequestTimeout, "the payload took longer than "+in.bodies.timeout.String()+" to arrive"))
	default:
		in.refuseUnread(w, Refuse(http.StatusBadRequest, "reading the payload failed (cut short)"))
	}
}

// refuseUnread answers a request whose body is not read whole, and
// closes its connection.
func (in *Intake) refuseUnread(w http.ResponseWriter, ref *Refusal) {
	w.Header().Set("Connection", "close")
	writeRefusal(w, ref)
}

func writeRefusal(w http.ResponseWriter, ref *Refusal) {
	for k, vs := range ref.Header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ref.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": ref.Message})
}
