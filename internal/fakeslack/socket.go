package fakeslack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// socketPath is where apps.connections.open sends Socket Mode clients.
const socketPath = "/socket"

// socketState is the fake's Socket Mode side.
type socketState struct {
	conns     map[int]*sockConn
	opened    int // connections ever accepted
	envelopes map[string]*Envelope
	order     []string
}

func (st *socketState) init() {
	st.conns = map[int]*sockConn{}
	st.envelopes = map[string]*Envelope{}
}

type sockConn struct {
	n    int
	ws   *websocket.Conn
	wmu  sync.Mutex // gorilla connections take one writer at a time
	done chan struct{}
}

func (c *sockConn) write(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.WriteJSON(v)
}

// Envelope is one Socket Mode envelope the fake sent, and its
// acknowledgement.
type Envelope struct {
	ID      string
	Type    string // events_api, interactive, slash_commands
	Payload json.RawMessage
	SentAt  time.Time
	// Attempts counts the sends (a redelivery adds one).
	Attempts int
	// Acked says the client acknowledged it, with Response (the ack's
	// payload, if any) at AckedAt.
	Acked    bool
	Response json.RawMessage
	AckedAt  time.Time
}

// openConnection is apps.connections.open: the address of a WebSocket.
func (s *Server) openConnection(in *request) (map[string]any, *errorAnswer) {
	return map[string]any{"url": "ws://" + in.r.Host + socketPath}, nil
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.sock.opened++
	c := &sockConn{n: s.sock.opened, ws: ws, done: make(chan struct{})}
	s.sock.conns[c.n] = c
	pingEvery := s.PingEvery
	s.mu.Unlock()
	if pingEvery <= 0 {
		pingEvery = 5 * time.Second
	}
	defer func() {
		s.mu.Lock()
		delete(s.sock.conns, c.n)
		s.changedLocked()
		s.mu.Unlock()
		close(c.done)
		ws.Close()
	}()
	if err := c.write(map[string]any{"type": "hello", "num_connections": 1,
		"connection_info": map[string]any{"app_id": AppID}, "debug_info": map[string]any{"host": "fakeslack"}}); err != nil {
		return
	}
	// Registered once hello is written, so an envelope sent to it comes
	// after the hello.
	s.mu.Lock()
	s.changedLocked()
	s.mu.Unlock()
	go func() {
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			c.wmu.Lock()
			err := ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second))
			c.wmu.Unlock()
			if err != nil {
				return
			}
			select {
			case <-c.done:
				return
			case <-t.C:
			}
		}
	}()
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var ack struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(data, &ack) != nil || ack.EnvelopeID == "" {
			s.t.Errorf("fake Slack: the Socket Mode client wrote %s, not an acknowledgement", data)
			continue
		}
		s.ack(ack.EnvelopeID, ack.Payload)
	}
}

func (s *Server) ack(id string, payload json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	env := s.sock.envelopes[id]
	if env == nil {
		s.t.Errorf("fake Slack: acknowledgement of unknown envelope %s", id)
		return
	}
	if env.Acked {
		return // an ack of a redelivery
	}
	env.Acked, env.Response, env.AckedAt = true, payload, s.now()
	if d := env.AckedAt.Sub(env.SentAt); d > s.ackWithin() {
		s.t.Errorf("fake Slack: envelope %s acknowledged after %s, more than Slack's %s", id, d, s.ackWithin())
	}
	s.changedLocked()
}

func (s *Server) ackWithin() time.Duration {
	if s.AckWithin > 0 {
		return s.AckWithin
	}
	return 3 * time.Second
}

// Connections counts the Socket Mode connections ever accepted, and
// those open now.
func (s *Server) Connections() (ever, open int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sock.opened, len(s.sock.conns)
}

// Send writes an envelope of kind (events_api, interactive,
// slash_commands) carrying payload to the newest open Socket Mode
// connection, waiting up to 30 seconds for one, and returns its id.
func (s *Server) Send(kind string, payload any) string {
	s.t.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	s.seq++
	id := fmt.Sprintf("env-%d", s.seq)
	s.sock.envelopes[id] = &Envelope{ID: id, Type: kind, Payload: raw}
	s.sock.order = append(s.sock.order, id)
	s.mu.Unlock()
	s.deliver(id)
	return id
}

// Redeliver sends envelope id again, as Slack does with one it saw no
// acknowledgement for, with its retry count.
func (s *Server) Redeliver(id string) {
	s.t.Helper()
	s.deliver(id)
}

func (s *Server) deliver(id string) {
	s.t.Helper()
	var c *sockConn
	s.WaitFor(30*time.Second, "a Socket Mode connection", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		c = nil
		for n, conn := range s.sock.conns {
			if c == nil || n > c.n {
				c = conn
			}
		}
		return c != nil
	})
	s.mu.Lock()
	env := s.sock.envelopes[id]
	env.Attempts++
	env.SentAt = s.now()
	msg := map[string]any{"envelope_id": id, "type": env.Type, "payload": env.Payload,
		"accepts_response_payload": env.Type != "events_api", "retry_attempt": env.Attempts - 1}
	if env.Attempts > 1 {
		msg["retry_reason"] = "timeout"
	}
	s.mu.Unlock()
	if err := c.write(msg); err != nil {
		s.t.Errorf("fake Slack: sending envelope %s: %v", id, err)
	}
}

// Envelope returns envelope id as sent and acknowledged so far.
func (s *Server) Envelope(id string) Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.sock.envelopes[id]
}

// WaitAck waits for the acknowledgement of envelope id and returns its
// payload.
func (s *Server) WaitAck(id string) json.RawMessage {
	s.t.Helper()
	s.WaitFor(30*time.Second, "the acknowledgement of envelope "+id, func() bool { return s.Envelope(id).Acked })
	return s.Envelope(id).Response
}

// Disconnect asks every Socket Mode client to reconnect, as Slack does
// before it refreshes a connection.
func (s *Server) Disconnect() {
	s.mu.Lock()
	conns := make([]*sockConn, 0, len(s.sock.conns))
	for _, c := range s.sock.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.write(map[string]any{"type": "disconnect", "reason": "refresh_requested", "debug_info": map[string]any{"host": "fakeslack"}})
	}
}

// Drop cuts every Socket Mode connection without a word, as a network
// failure does.
func (s *Server) Drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.sock.conns {
		c.ws.UnderlyingConn().Close()
	}
}

func (s *Server) closeSockets() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.sock.conns {
		c.ws.Close()
	}
	for _, id := range s.sock.order {
		if env := s.sock.envelopes[id]; !env.Acked && s.now().Sub(env.SentAt) > s.ackWithin() {
			s.t.Errorf("fake Slack: envelope %s (%s) was never acknowledged", id, env.Type)
		}
	}
}
