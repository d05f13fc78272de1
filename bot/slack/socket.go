package slack

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// socketBackoff bounds the wait before Socket Mode connects again after
// its client gave up (a reconnection that failed).
const socketBackoff = 30 * time.Second

// socket keeps a Socket Mode connection open until ctx ends: slack-go's
// client reconnects when Slack asks it to (a disconnect warning) and when
// the connection is lost; when it gives up, the connection is opened
// again after a pause. A token Slack refuses stops it, said in the log.
func (s *Service) socket(ctx context.Context) {
	wait := time.Second
	for ctx.Err() == nil {
		sm := socketmode.New(s.client.api, socketmode.OptionLog(slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)))
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- sm.RunContext(runCtx) }()
		fatal := s.envelopes(runCtx, sm, done)
		stop()
		if fatal || ctx.Err() != nil {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, socketBackoff)
	}
}

// envelopes takes the client's events until it stops (its error on
// done); true means it stopped for good (the token refused).
func (s *Service) envelopes(ctx context.Context, sm *socketmode.Client, done <-chan error) bool {
	for {
		select {
		case err := <-done:
			if err != nil && ctx.Err() == nil {
				s.log.Warn("the Socket Mode connection ended; connecting again", "err", err)
			}
			return false
		case evt := <-sm.Events:
			switch evt.Type {
			case socketmode.EventTypeConnected:
				s.log.Info("Slack Socket Mode connected")
			case socketmode.EventTypeConnectionError:
				s.log.Warn("connecting to Slack's Socket Mode failed; trying again", "err", evt.Data)
			case socketmode.EventTypeDisconnect:
				s.log.Info("Slack asked to reconnect (a disconnect warning); reconnecting")
			case socketmode.EventTypeInvalidAuth:
				s.log.Error("Slack refuses the app-level token for Socket Mode: set ITERION_SLACK_APP_TOKEN to an xapp- token with the connections:write scope")
				return true
			case socketmode.EventTypeEventsAPI, socketmode.EventTypeInteractive, socketmode.EventTypeSlashCommand:
				if evt.Request != nil {
					s.envelope(ctx, sm, *evt.Request)
				}
			}
		case <-ctx.Done():
			// The client's goroutines end with ctx; done follows.
			<-done
			return false
		}
	}
}

// envelope takes one envelope as the HTTP intake takes a request: what
// it asks for is stored, then it is acknowledged (with the in-request
// answer as the ack's payload: a modal's errors); a delivery that cannot
// be stored is not acknowledged, so Slack sends it again.
func (s *Service) envelope(ctx context.Context, sm *socketmode.Client, req socketmode.Request) {
	var tk taken
	var err error
	switch req.Type {
	case socketmode.RequestTypeEventsAPI:
		tk, err = s.taker.event(ctx, req.Payload)
	case socketmode.RequestTypeInteractive:
		tk, err = s.taker.interaction(ctx, req.Payload)
	case socketmode.RequestTypeSlashCommands:
		var c slackgo.SlashCommand
		if err = json.Unmarshal(req.Payload, &c); err == nil {
			tk, err = s.taker.command(c)
		}
	}
	if err != nil {
		// Refused (a payload Slack would not send): acknowledged, so it is
		// not sent again, and logged.
		s.log.Warn("a Socket Mode envelope was refused", "envelope", req.EnvelopeID, "type", req.Type, "err", err)
		_ = sm.Ack(req)
		return
	}
	fresh := false
	if tk.d != nil {
		if fresh, err = s.db.RecordDelivery(ctx, *tk.d); err != nil {
			s.log.Error("storing a Socket Mode delivery failed; Slack sends it again", "delivery", tk.d.ID, "err", err)
			return
		}
		if req.RetryAttempt > 0 {
			s.log.Info("Slack sent an envelope again", "delivery", tk.d.ID, "retry", req.RetryAttempt, "reason", req.RetryReason, "new", fresh)
		}
	}
	var ackErr error
	if tk.body != nil {
		ackErr = sm.Ack(req, json.RawMessage(tk.body))
	} else {
		ackErr = sm.Ack(req)
	}
	if ackErr != nil {
		s.log.Warn("acknowledging a Socket Mode envelope failed", "envelope", req.EnvelopeID, "err", ackErr)
	}
	if fresh {
		s.worker.Wake()
	}
}
