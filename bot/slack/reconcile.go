package slack

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/iterion-bot/iterion/engine"
)

// reconcile takes in the replies written in the threads of runs still
// going while the server was down, or that Slack gave up delivering: for
// each run with questions waiting in Slack, its thread is read since the
// oldest of them (conversations.replies), and each person's reply is
// stored as the delivery its event would have been. A reply already taken
// (its event arrived) is the same delivery, so it has no second effect.
// It returns how many replies were new.
func (s *Service) reconcile(ctx context.Context) (int, error) {
	runs, err := s.db.Runs(ctx, engine.RunFilter{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, run := range runs {
		if run.Status.Terminal() || !slices.Contains(run.Channels, "slack") {
			continue
		}
		posts, err := s.db.RunPosts(ctx, run.ID)
		if err != nil {
			return n, err
		}
		if posts[postCard] == "" {
			continue
		}
		card := splitRef(posts[postCard])
		ixs, err := s.db.Interactions(ctx, run.ID)
		if err != nil {
			return n, err
		}
		oldest := ""
		for _, ix := range ixs {
			if p := ix.Posts["slack"]; p != "" && ix.Pending() && ix.Kind != engine.KindAwait {
				if ts := splitRef(p).ts; oldest == "" || tsBefore(ts, oldest) {
					oldest = ts
				}
			}
		}
		if oldest == "" {
			continue
		}
		msgs, err := s.client.Replies(ctx, card.channel, card.ts, oldest)
		if err != nil {
			return n, err
		}
		for _, m := range msgs {
			if !tsBefore(oldest, m.Timestamp) {
				continue // the question itself, or older
			}
			ev := innerEvent{Type: "message", SubType: m.SubType, User: m.User, BotID: m.BotID, Text: m.Text,
				TS: m.Timestamp, ThreadTS: m.ThreadTimestamp, Channel: card.channel}
			d, err := s.taker.message(ctx, ev)
			if err != nil {
				return n, err
			}
			if d == nil {
				continue
			}
			d.Payload, _ = json.Marshal(outer{Type: "event_callback", TeamID: s.id.TeamID, Event: ev}) // cannot fail: strings
			fresh, err := s.db.RecordDelivery(ctx, *d)
			if err != nil {
				return n, err
			}
			if fresh {
				n++
			}
		}
	}
	if n > 0 {
		s.worker.Wake()
	}
	return n, nil
}

// tsBefore orders two message timestamps ("1700000000.000123"): seconds,
// then the digits after the dot.
func tsBefore(a, b string) bool {
	as, af := splitTS(a)
	bs, bf := splitTS(b)
	if len(as) != len(bs) {
		return len(as) < len(bs)
	}
	if as != bs {
		return as < bs
	}
	return af < bf
}

func splitTS(ts string) (secs, frac string) {
	for i := 0; i < len(ts); i++ {
		if ts[i] == '.' {
			return ts[:i], ts[i+1:]
		}
	}
	return ts, ""
}
