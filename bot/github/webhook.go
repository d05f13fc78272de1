package github

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/store"
)

// MaxPayload is GitHub's own limit on a webhook payload; larger bodies are
// refused with 413.
const MaxPayload = 25 << 20

// deliveryRecorder is what the intake needs from the store.
type deliveryRecorder interface {
	RecordDelivery(ctx context.Context, d store.Delivery) (bool, error)
}

// handledEvents are the event types the bot acts on; others are
// acknowledged and ignored, without being stored. (push is decoded, but
// nothing reads it yet: it is stored once schedules refresh on it.)
var handledEvents = map[string]bool{
	"ping": true, "issue_comment": true, "pull_request": true, "installation": true,
	"check_run": true, "check_suite": true,
}

// Intake receives GitHub webhooks: it verifies the signature, stores the
// delivery (deduplicated by its id) and only then acknowledges it with 202,
// so that nothing acknowledged is lost; the work happens later, in a worker
// that reads the stored deliveries.
type Intake struct {
	secret []byte
	source string
	store  deliveryRecorder
	log    *slog.Logger
	// wake tells the worker a new delivery is stored; it must not block.
	wake func()

	// Bodies are read before the signature can be checked, so what
	// unauthenticated clients may hold is bounded: at most SmallBodies
	// bodies of up to SmallBody bytes at once, larger ones (to MaxPayload)
	// from a budget of LargeBytes, each read within BodyTimeout. A request
	// beyond them is refused at once with 503 and Retry-After, holding
	// nothing; GitHub's deliveries, a few KiB, stay in the small lane.
	SmallBodies int
	LargeBytes  int64
	BodyTimeout time.Duration

	mu         sync.Mutex
	smallInUse int
	largeInUse int64
}

// The intake's bounds by default (NewIntake).
const (
	// SmallBody is the largest body of the small lane.
	SmallBody          = 256 << 10
	defaultSmallBodies = 256
	defaultLargeBytes  = 64 << 20
	defaultBodyTimeout = 10 * time.Second
)

// NewIntake returns the webhook handler of one GitHub App.
func NewIntake(appID string, secret []byte, st deliveryRecorder, log *slog.Logger, wake func()) *Intake {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if wake == nil {
		wake = func() {}
	}
	return &Intake{secret: secret, source: "github/" + appID, store: st, log: log, wake: wake,
		SmallBodies: defaultSmallBodies, LargeBytes: defaultLargeBytes, BodyTimeout: defaultBodyTimeout}
}

// Sign returns the X-Hub-Signature-256 value of body: production checks
// with it, and tests sign their deliveries with it.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// validSignature checks X-Hub-Signature-256 in constant time. There is no
// fallback to the SHA-1 header.
func (in *Intake) validSignature(header string, body []byte) bool {
	if !strings.HasPrefix(header, "sha256=") {
		return false
	}
	return hmac.Equal([]byte(header), []byte(Sign(in.secret, body)))
}

func (in *Intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httpError(w, http.StatusMethodNotAllowed, "webhooks are POSTed")
		return
	}
	// A refused body is not read: the connection closes after the answer,
	// which goes out at once (net/http would otherwise read what is left of
	// a small body first, from a client that may be sending it slowly).
	if r.ContentLength > MaxPayload {
		w.Header().Set("Connection", "close")
		httpError(w, http.StatusRequestEntityTooLarge, "payload larger than 25 MiB")
		return
	}
	limit, release, ok := in.admit(r.ContentLength)
	if !ok {
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "10")
		httpError(w, http.StatusServiceUnavailable, "too many webhook bodies being read; redeliver it")
		return
	}
	// The deadline bounds a slow body; the controller is absent only under
	// test recorders.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(in.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	release()
	if err != nil {
		w.Header().Set("Connection", "close")
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig) && limit < MaxPayload:
			httpError(w, http.StatusBadRequest, "the payload is longer than its Content-Length")
		case errors.As(err, &tooBig):
			httpError(w, http.StatusRequestEntityTooLarge, "payload larger than 25 MiB")
		default:
			httpError(w, http.StatusBadRequest, "reading the payload failed (too slow, or cut)")
		}
		return
	}
	if !in.validSignature(r.Header.Get("X-Hub-Signature-256"), body) {
		in.log.Warn("webhook refused: bad signature", "delivery", r.Header.Get("X-GitHub-Delivery"))
		httpError(w, http.StatusUnauthorized, "invalid or missing X-Hub-Signature-256")
		return
	}
	id, event := r.Header.Get("X-GitHub-Delivery"), r.Header.Get("X-GitHub-Event")
	if id == "" || event == "" || len(id) > 128 {
		httpError(w, http.StatusBadRequest, "missing X-GitHub-Delivery or X-GitHub-Event")
		return
	}
	if !json.Valid(body) {
		httpError(w, http.StatusBadRequest, "the payload is not JSON")
		return
	}
	log := in.log.With("delivery", id, "event", event)
	if !handledEvents[event] {
		log.Debug("webhook ignored: event type not handled")
		w.WriteHeader(http.StatusAccepted)
		return
	}
	fresh, err := in.store.RecordDelivery(r.Context(), store.Delivery{Source: in.source, ID: id, Event: event, Payload: body, Group: installationGroup(body)})
	if err != nil {
		log.Error("storing a webhook delivery failed", "err", err)
		httpError(w, http.StatusServiceUnavailable, "the delivery could not be stored; redeliver it")
		return
	}
	// Acknowledged before the worker is woken: a delivery being handled
	// has always been answered 202. The empty body's length is set so the
	// flush sends the whole response at once, not a chunked stream.
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusAccepted)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if fresh {
		in.wake()
	} else {
		log.Info("webhook redelivered: already stored")
	}
}

// installationGroup is the delivery's group: its installation, the unit
// GitHub's tokens, rate limits and pacing apply to. "" when the payload
// names none.
func installationGroup(body []byte) string {
	var p struct {
		Installation struct {
			ID int64 `json:"id"`
		} `json:"installation"`
	}
	if json.Unmarshal(body, &p) != nil || p.Installation.ID == 0 {
		return ""
	}
	return "installation/" + strconv.FormatInt(p.Installation.ID, 10)
}

// admit reserves room for a body of the declared length (-1 unknown):
// the small lane for bodies known to fit it, the large budget for the
// others (an unknown length reserves all MaxPayload). It returns the most
// the body may hold and the release.
func (in *Intake) admit(declared int64) (limit int64, release func(), ok bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if declared >= 0 && declared <= SmallBody {
		if in.smallInUse >= in.SmallBodies {
			return 0, nil, false
		}
		in.smallInUse++
		return SmallBody, func() {
			in.mu.Lock()
			in.smallInUse--
			in.mu.Unlock()
		}, true
	}
	n := declared
	if n < 0 {
		n = MaxPayload
	}
	if in.largeInUse+n > in.LargeBytes {
		return 0, nil, false
	}
	in.largeInUse += n
	return n, func() {
		in.mu.Lock()
		in.largeInUse -= n
		in.mu.Unlock()
	}, true
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
