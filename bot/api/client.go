package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/iterion-bot/iterion/bot/schedule"
	"github.com/iterion-bot/iterion/engine"
)

// Client calls the API of a store's owner.
type Client struct {
	http  *http.Client
	base  string
	token string
}

// NewUnixClient returns a client for the API served on a unix socket,
// sending token with every request. DialLocal finds the socket and the
// token of a store's owner; use it rather than a path from elsewhere.
func NewUnixClient(socket, token string) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	return &Client{http: &http.Client{Transport: tr, Timeout: 30 * time.Second}, base: "http://owner", token: token}
}

// ClientOptions configure a Client of NewClient. Zero fields mean the
// defaults noted.
type ClientOptions struct {
	// HTTP makes the requests. nil means http.DefaultClient.
	HTTP *http.Client
	// Token is sent as "Authorization: Bearer <token>". Empty sends none.
	Token string
}

// NewClient returns a client for the API at base, such as iterion serve's
// address or a test server.
func NewClient(base string, opts ClientOptions) *Client {
	hc := opts.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{http: hc, base: base, token: opts.Token}
}

// Error is an error reply. It matches the engine's sentinel errors with
// errors.Is, so callers branch the same way with or without an owner.
type Error struct {
	Status  int
	Code    string
	Message string
	// Fields, for an invalid answer, are the form's fields.
	Fields []engine.FormField
}

func (e *Error) Error() string { return e.Message }

// Is maps the reply's code back to the engine's sentinel.
func (e *Error) Is(target error) bool {
	for _, m := range errorCodes {
		if m.code == e.Code && m.err == target {
			return true
		}
	}
	return false
}

// Runs lists runs, newest first.
func (c *Client) Runs(ctx context.Context, f engine.RunFilter) ([]*engine.Run, error) {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", string(f.Status))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out struct {
		Runs []*engine.Run `json:"runs"`
	}
	err := c.do(ctx, http.MethodGet, "/api/runs?"+q.Encode(), nil, &out)
	return out.Runs, err
}

// Run returns one run.
func (c *Client) Run(ctx context.Context, id string) (*engine.Run, error) {
	var run engine.Run
	if err := c.do(ctx, http.MethodGet, "/api/runs/"+url.PathEscape(id), nil, &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// Events returns up to limit events of a run with Seq > after. With wait
// above 0 and no such event yet, the owner holds the request until one is
// stored, the run's status changes or wait passes (no events then; wait
// is cut to MaxWait); a run that is over answers at once. A wait the
// owner ends as it shuts down fails with ErrShuttingDown.
func (c *Client) Events(ctx context.Context, id string, after int64, limit int, wait time.Duration) ([]engine.Event, error) {
	var out struct {
		Events []engine.Event `json:"events"`
	}
	path := fmt.Sprintf("/api/runs/%s/events?after=%d&limit=%d", url.PathEscape(id), after, limit)
	cl := c
	if wait > 0 {
		path += "&wait=" + url.QueryEscape(wait.String())
		// The request lasts as long as the wait, beyond the client's
		// usual timeout.
		if t := c.http.Timeout; t > 0 {
			hc := *c.http
			hc.Timeout = t + min(wait, MaxWait)
			cl = &Client{http: &hc, base: c.base, token: c.token}
		}
	}
	err := cl.do(ctx, http.MethodGet, path, nil, &out)
	return out.Events, err
}

// Pending lists a run's pending async questions.
func (c *Client) Pending(ctx context.Context, id string) ([]*engine.Interaction, error) {
	var out struct {
		Interactions []*engine.Interaction `json:"interactions"`
	}
	err := c.do(ctx, http.MethodGet, "/api/runs/"+url.PathEscape(id)+"/interactions/pending", nil, &out)
	return out.Interactions, err
}

// Answer answers a question (body.Answer) or a form (body.Answers). The
// owner records the answer as this client's caller (see Caller).
func (c *Client) Answer(ctx context.Context, runID, interactionID string, body AnswerBody) (*AnswerResponse, error) {
	var out AnswerResponse
	path := "/api/runs/" + url.PathEscape(runID) + "/interactions/" + url.PathEscape(interactionID) + "/answer"
	err := c.do(ctx, http.MethodPost, path, body, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Cancel asks the owner to stop a run that is not over (executing, paused
// or interrupted); it reports whether it did.
func (c *Client) Cancel(ctx context.Context, id string) (bool, error) {
	var out struct {
		Cancelled bool `json:"cancelled"`
	}
	err := c.do(ctx, http.MethodPost, "/api/runs/"+url.PathEscape(id)+"/cancel", struct{}{}, &out)
	return out.Cancelled, err
}

// Schedules lists the owner's schedules.
func (c *Client) Schedules(ctx context.Context) ([]schedule.Status, error) {
	var out struct {
		Schedules []schedule.Status `json:"schedules"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/schedules", nil, &out); err != nil {
		return nil, err
	}
	return out.Schedules, nil
}

// FireSchedule fires a schedule now and returns its full name and the run
// it started. It waits as long as the start takes (a checkout), bounded
// by ctx.
func (c *Client) FireSchedule(ctx context.Context, name string) (full, runID string, err error) {
	var out struct {
		Schedule string `json:"schedule"`
		RunID    string `json:"run_id"`
	}
	slow := *c
	hc := *c.http
	hc.Timeout = 0
	slow.http = &hc
	err = slow.do(ctx, http.MethodPost, "/api/schedules/"+url.PathEscape(name)+"/run", struct{}{}, &out)
	return out.Schedule, out.RunID, err
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("calling the store owner: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the store owner's reply: %w", err)
	}
	if resp.StatusCode >= 300 {
		return decodeError(resp, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decoding the store owner's reply: %w", err)
		}
	}
	return nil
}

// decodeError is the *Error of an error reply whose body is data.
func decodeError(resp *http.Response, data []byte) error {
	var eb errorBody
	if json.Unmarshal(data, &eb) != nil || eb.Error == "" {
		eb.Error = fmt.Sprintf("store owner replied %s", resp.Status)
	}
	return &Error{Status: resp.StatusCode, Code: eb.Code, Message: eb.Error, Fields: eb.Fields}
}
