package fakeslack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Signed returns a POST of body to target as Slack sends it, signed with
// secret at time at (X-Slack-Signature over v0:timestamp:body).
func Signed(target, secret, contentType string, body []byte, at time.Time) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	ts := at.Unix()
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Slack-Signature", Sign(secret, ts, body))
	return req
}

// Form is body as an interaction's form: payload=<json>.
func Form(payload []byte) []byte {
	return []byte(url.Values{"payload": {string(payload)}}.Encode())
}

// MessageEvent returns the Events API body Slack sends for m, a
// message someone posted (Post), with eventID as its event_id.
func MessageEvent(m Message, eventID string) []byte {
	ev := map[string]any{"type": "message", "channel": m.Channel, "user": m.User, "text": m.Text, "ts": m.TS,
		"channel_type": "channel", "event_ts": m.TS}
	if m.ThreadTS != "" {
		ev["thread_ts"] = m.ThreadTS
	}
	b, _ := json.Marshal(map[string]any{"token": "unused", "team_id": TeamID, "api_app_id": AppID, "type": "event_callback",
		"event_id": eventID, "event_time": time.Now().Unix(), "event": ev})
	return b
}

// EditEvent returns the Events API body of an edit of m (subtype
// message_changed).
func EditEvent(m Message, text, eventID string) []byte {
	b, _ := json.Marshal(map[string]any{"team_id": TeamID, "type": "event_callback", "event_id": eventID,
		"event": map[string]any{"type": "message", "subtype": "message_changed", "channel": m.Channel, "hidden": true, "ts": m.TS,
			"message": map[string]any{"type": "message", "user": m.User, "text": text, "ts": m.TS, "thread_ts": m.ThreadTS}}})
	return b
}

// Click returns the interaction payload of user clicking the element
// actionID (with value) of the bot's message m, with a fresh trigger id.
func (s *Server) Click(user string, m Message, actionID, value string) []byte {
	action := map[string]any{"action_id": actionID, "block_id": "b", "type": "button", "value": value,
		"action_ts": fmt.Sprintf("%d.%06d", s.now().Unix(), s.bump())}
	return s.interaction(user, m, action)
}

// Pick returns the interaction payload of user picking the option of
// value in the select actionID of the bot's message m.
func (s *Server) Pick(user string, m Message, actionID, value string) []byte {
	action := map[string]any{"action_id": actionID, "block_id": "b", "type": "static_select",
		"selected_option": map[string]any{"value": value, "text": map[string]any{"type": "plain_text", "text": value}},
		"action_ts":       fmt.Sprintf("%d.%06d", s.now().Unix(), s.bump())}
	return s.interaction(user, m, action)
}

func (s *Server) bump() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return s.seq
}

func (s *Server) interaction(user string, m Message, action map[string]any) []byte {
	container := map[string]any{"type": "message", "message_ts": m.TS, "channel_id": m.Channel, "is_ephemeral": false}
	if m.ThreadTS != "" {
		container["thread_ts"] = m.ThreadTS
	}
	b, _ := json.Marshal(map[string]any{
		"type": "block_actions", "team": map[string]any{"id": TeamID, "domain": "acme"},
		"user": map[string]any{"id": user, "username": user, "team_id": TeamID}, "api_app_id": AppID,
		"container": container, "trigger_id": s.NewTrigger(user),
		"channel":      map[string]any{"id": m.Channel, "name": ChannelName},
		"message":      map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "bot_id": m.BotID},
		"response_url": "https://hooks.slack.com/actions/T0FAKE/1/x", "actions": []any{action},
	})
	return b
}

// Submission returns the view_submission payload of user submitting v
// with values: an input's block id → the text typed, or the value of the
// option picked (for a select).
func (s *Server) Submission(user string, v View, values map[string]string) []byte {
	var view struct {
		CallbackID      string `json:"callback_id"`
		PrivateMetadata string `json:"private_metadata"`
		Blocks          []struct {
			Type    string `json:"type"`
			BlockID string `json:"block_id"`
			Element struct {
				Type     string `json:"type"`
				ActionID string `json:"action_id"`
			} `json:"element"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(v.View, &view); err != nil {
		s.t.Fatalf("fake Slack: view %s: %v", v.ID, err)
	}
	state := map[string]any{}
	for _, b := range view.Blocks {
		if b.Type != "input" {
			continue
		}
		val, ok := values[b.BlockID]
		if !ok {
			continue
		}
		el := map[string]any{"type": b.Element.Type}
		if b.Element.Type == "static_select" {
			el["selected_option"] = map[string]any{"value": val, "text": map[string]any{"type": "plain_text", "text": val}}
		} else {
			el["value"] = val
		}
		state[b.BlockID] = map[string]any{b.Element.ActionID: el}
	}
	out, _ := json.Marshal(map[string]any{
		"type": "view_submission", "team": map[string]any{"id": TeamID, "domain": "acme"},
		"user": map[string]any{"id": user, "username": user, "team_id": TeamID}, "api_app_id": AppID,
		"trigger_id": s.NewTrigger(user),
		"view": map[string]any{"id": v.ID, "type": "modal", "callback_id": view.CallbackID, "private_metadata": view.PrivateMetadata,
			"hash": fmt.Sprintf("%d.%d", s.now().Unix(), s.bump()), "state": map[string]any{"values": state}},
	})
	return out
}

// Command returns the form body of user typing /iterion text in channel.
func (s *Server) Command(user, channel, text string) []byte {
	return []byte(url.Values{
		"token": {"unused"}, "team_id": {TeamID}, "team_domain": {"acme"}, "channel_id": {channel}, "channel_name": {ChannelName},
		"user_id": {user}, "user_name": {user}, "command": {"/iterion"}, "text": {text}, "api_app_id": {AppID},
		"response_url": {"https://hooks.slack.com/commands/T0FAKE/1/x"}, "trigger_id": {s.NewTrigger(user)},
	}.Encode())
}
