package github

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/iterion-bot/iterion/bot/delivery"
)

// MaxPayload is GitHub's own limit on a webhook payload; larger bodies are
// refused with 413.
const MaxPayload = 25 << 20

// handledEvents are the event types the bot acts on; others are
// acknowledged and ignored, without being stored. (A push to a default
// branch reads the repository's schedules again; github_app_authorization
// revoked drops the person's account links. ping, sent when the
// App's webhook is set up, needs nothing but the 202.)
var handledEvents = map[string]bool{
	"issue_comment": true, "pull_request": true, "installation": true,
	"check_run": true, "check_suite": true, "push": true, "github_app_authorization": true,
}

// AuthorizationsGroup is the group of github_app_authorization
// deliveries, which name a person, not an installation.
const AuthorizationsGroup = "authorizations"

// IntakeOptions configure NewIntake. AppID, WebhookSecret and Store are
// required.
type IntakeOptions struct {
	// AppID is the App's id; its deliveries' Source is "github/<AppID>".
	AppID int64
	// WebhookSecret is the secret of X-Hub-Signature-256.
	WebhookSecret []byte
	// Store keeps the deliveries.
	Store delivery.Recorder
	// Bodies is the pool the bodies are read into, shared with the
	// server's other channels; nil means one of the intake's own, with
	// delivery.BodyOptions' defaults.
	Bodies *delivery.Bodies
	// Wake tells the worker a new delivery is stored; it must not block.
	// nil means nobody is told.
	Wake func()
	// Log receives the intake's logs; nil means none.
	Log *slog.Logger
}

// NewIntake returns the webhook endpoint of one GitHub App: the
// channel-neutral intake (delivery.Intake: bounded bodies, stored before
// acknowledged, then the worker woken) with GitHub's side, webhooks, and
// GitHub's limit on a payload, MaxPayload.
func NewIntake(o IntakeOptions) *delivery.Intake {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ch := &webhooks{secret: o.WebhookSecret, source: "github/" + strconv.FormatInt(o.AppID, 10), log: log}
	return delivery.NewIntake(ch, delivery.IntakeOptions{Store: o.Store, Bodies: o.Bodies, MaxBody: MaxPayload, Wake: o.Wake, Log: o.Log})
}

// webhooks is GitHub's side of the intake: X-Hub-Signature-256, the
// delivery id and event headers, the events the App acts on, and the
// installation a delivery is work for.
type webhooks struct {
	secret []byte
	source string
	log    *slog.Logger
}

var _ delivery.Channel = (*webhooks)(nil)

// Sign returns the X-Hub-Signature-256 value of body: tests sign their
// deliveries with it, as production checks them.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func badSignature() *delivery.Refusal {
	return delivery.Refuse(http.StatusUnauthorized, "invalid or missing X-Hub-Signature-256")
}

// Verifier checks X-Hub-Signature-256, an HMAC-SHA256 of the body, as the
// body arrives. There is no fallback to the SHA-1 header: a request
// without the SHA-256 one is refused unread.
func (c *webhooks) Verifier(h http.Header) (delivery.Verifier, error) {
	hexSig, ok := strings.CutPrefix(h.Get("X-Hub-Signature-256"), "sha256=")
	want, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(want) != sha256.Size {
		c.log.Warn("webhook refused: bad signature", "delivery", h.Get("X-GitHub-Delivery"))
		return nil, badSignature()
	}
	return &signature{mac: hmac.New(sha256.New, c.secret), want: want, delivery: h.Get("X-GitHub-Delivery"), log: c.log}, nil
}

// signature is a request's HMAC, computed as its body arrives.
type signature struct {
	mac      hash.Hash
	want     []byte
	delivery string
	log      *slog.Logger
}

func (s *signature) Write(p []byte) (int, error) { return s.mac.Write(p) }

// Verify compares the HMAC with the header's in constant time.
func (s *signature) Verify() error {
	if !hmac.Equal(s.mac.Sum(nil), s.want) {
		s.log.Warn("webhook refused: bad signature", "delivery", s.delivery)
		return badSignature()
	}
	return nil
}

// Accept makes the delivery of a signed webhook: keyed by X-GitHub-Delivery,
// of the X-GitHub-Event type, in its installation's group. Events the App
// does not act on, and payloads that name no installation (a repository's
// own webhook pointed at the bot, not the App's), are acknowledged and
// ignored, unstored.
func (c *webhooks) Accept(_ context.Context, h http.Header, body []byte) (delivery.Outcome, error) {
	id, event := h.Get("X-GitHub-Delivery"), h.Get("X-GitHub-Event")
	if id == "" || event == "" || len(id) > 128 {
		return delivery.Outcome{}, delivery.Refuse(http.StatusBadRequest, "missing X-GitHub-Delivery or X-GitHub-Event")
	}
	if !json.Valid(body) {
		return delivery.Outcome{}, delivery.Refuse(http.StatusBadRequest, "the payload is not JSON")
	}
	log := c.log.With("delivery", id, "event", event)
	if !handledEvents[event] {
		log.Debug("webhook ignored: event type not handled")
		return delivery.Outcome{}, nil
	}
	group := installationGroup(body)
	if event == "github_app_authorization" {
		group = AuthorizationsGroup
	}
	if group == "" {
		log.Debug("webhook ignored: the payload names no installation (a repository webhook, not the App's)")
		return delivery.Outcome{}, nil
	}
	return delivery.Outcome{Delivery: &delivery.Delivery{Source: c.source, ID: id, Event: event, Payload: body, Group: group}}, nil
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
