package runchannel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/engine/permission"
)

// node is an in-memory async node: the questions it posted, their
// answers, its inbox.
type node struct {
	mu        sync.Mutex
	questions []string
	answers   map[string]string
	inbox     []string
}

func (n *node) id(i int) string { return fmt.Sprintf("r1_n_async_%d", i+1) }

func (n *node) task(run, nodeID, interaction string) *engine.Task {
	t := &engine.Task{RunID: run, NodeID: nodeID, Interaction: interaction,
		InboxDrain: func(context.Context) ([]string, error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			msgs := n.inbox
			n.inbox = nil
			return msgs, nil
		}}
	if interaction != "async" {
		return t
	}
	t.PostQuestion = func(_ context.Context, q engine.AsyncQuestion) (string, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.questions = append(n.questions, q.Question)
		return n.id(len(n.questions) - 1), nil
	}
	t.PendingQuestions = func(context.Context) ([]engine.PendingQuestion, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		var p []engine.PendingQuestion
		for i, q := range n.questions {
			if _, ok := n.answers[n.id(i)]; !ok {
				p = append(p, engine.PendingQuestion{InteractionID: n.id(i), Question: q})
			}
		}
		return p, nil
	}
	t.CollectAnswers = func(context.Context) (string, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		var lines []string
		for i, q := range n.questions {
			lines = append(lines, fmt.Sprintf("- [%s] Q: %s — A: %s", n.id(i), q, n.answers[n.id(i)]))
		}
		return "All posted questions are answered:\n" + strings.Join(lines, "\n"), nil
	}
	return t
}

func (n *node) answer(id, text string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.answers == nil {
		n.answers = map[string]string{}
	}
	n.answers[id] = text
	n.inbox = append(n.inbox, "[Answer to question "+id+"] — A: "+text)
}

func client(t *testing.T, s *runchannel.Session) *runchannel.Client {
	t.Helper()
	env := map[string]string{}
	for _, kv := range s.ChannelEnv() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	c, err := runchannel.ClientFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The interaction calls of an async node, as claw runs them: post, the
// pending list, await (the backend's hook while something is pending, the
// answers at once when nothing is), the inbox, ask_user through the
// backend's hook.
func TestChannelCalls(t *testing.T) {
	ctx := context.Background()
	n := &node{}
	var asked []engine.AsyncQuestion
	var awaited [][]engine.PendingQuestion
	s := open(t, n.task("r1", "n", "async"), runchannel.Options{
		Ask: func(_ context.Context, q engine.AsyncQuestion) (string, error) {
			asked = append(asked, q)
			return "the run is now paused, the question is with a human", nil
		},
		AwaitPending: func(_ context.Context, p []engine.PendingQuestion) (string, error) {
			awaited = append(awaited, p)
			return "paused until answered", nil
		},
	})
	c := client(t, s)

	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []runchannel.ToolDef
	for _, tool := range asktools.For("async") {
		want = append(want, runchannel.ToolDef{Name: tool.Name, Description: tool.Description, InputSchema: tool.Schema})
	}
	// The schemas come back as JSON decodes them.
	wantJSON, _ := json.Marshal(want)
	gotJSON, _ := json.Marshal(tools)
	if string(wantJSON) != string(gotJSON) {
		t.Errorf("tools = %s, want %s", gotJSON, wantJSON)
	}

	reply, err := c.Call(ctx, asktools.AskUserAsync, json.RawMessage(`{"question":"Which DB?","options":[{"id":"pg","label":"Postgres"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (runchannel.Reply{Text: asktools.PostedText + " (question id: r1_n_async_1)"}); reply != want {
		t.Errorf("ask_user_async = %+v, want %+v", reply, want)
	}
	pending, err := c.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]engine.PendingQuestion{{InteractionID: "r1_n_async_1", Question: "Which DB?"}}, pending); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	if reply, err = c.Call(ctx, asktools.AwaitAnswers, nil); err != nil || reply.Text != "paused until answered" || len(awaited) != 1 || len(awaited[0]) != 1 {
		t.Errorf("await with a question pending = %+v, %v (hook saw %v), want the hook's text", reply, err, awaited)
	}

	n.answer("r1_n_async_1", "Postgres")
	n.inbox = append(n.inbox, "also: keep the tests green")
	reply, err = c.Call(ctx, asktools.AwaitAnswers, json.RawMessage(`{"note":"need the DB"}`))
	if want := "All posted questions are answered:\n- [r1_n_async_1] Q: Which DB? — A: Postgres\n\nOperator messages:\nalso: keep the tests green"; err != nil || reply.Text != want || reply.IsError {
		t.Errorf("await when answered = %+v, %v; want %q", reply, err, want)
	}
	if msgs, err := c.Inbox(ctx); err != nil || len(msgs) != 0 {
		t.Errorf("inbox after await = %q, %v; want it drained by await", msgs, err)
	}
	n.inbox = append(n.inbox, "a note")
	if msgs, err := c.Inbox(ctx); err != nil || !cmp.Equal(msgs, []string{"a note"}) {
		t.Errorf("inbox = %q, %v", msgs, err)
	}

	reply, err = c.Call(ctx, asktools.AskUser, json.RawMessage(`{"question":"Delete the branch?"}`))
	if err != nil || reply.Text != "the run is now paused, the question is with a human" || len(asked) != 1 || asked[0].Question != "Delete the branch?" {
		t.Errorf("ask_user = %+v, %v (hook saw %v)", reply, err, asked)
	}
	for _, tc := range []struct{ tool, input, want string }{
		{asktools.AskUser, `{"question":"  "}`, "question is empty: ask_user needs a question"},
		{asktools.AskUserAsync, `{}`, "question is empty: ask_user_async needs a question"},
	} {
		if reply, err := c.Call(ctx, tc.tool, json.RawMessage(tc.input)); err != nil || !reply.IsError || reply.Text != tc.want {
			t.Errorf("%s %s = %+v, %v; want the error %q", tc.tool, tc.input, reply, err, tc.want)
		}
	}
}

// Without the backend's hooks the tools say what they cannot do, as the
// model's tool error, and never do nothing.
func TestChannelWithoutHooks(t *testing.T) {
	ctx := context.Background()
	n := &node{}
	s := open(t, n.task("r1", "n", "async"), runchannel.Options{})
	c := client(t, s)
	if reply, _ := c.Call(ctx, asktools.AskUser, json.RawMessage(`{"question":"Q?"}`)); !reply.IsError || !strings.Contains(reply.Text, "ask_user cannot be served on this node") {
		t.Errorf("ask_user = %+v", reply)
	}
	c.Call(ctx, asktools.AskUserAsync, json.RawMessage(`{"question":"Q?"}`))
	if reply, _ := c.Call(ctx, asktools.AwaitAnswers, nil); !reply.IsError || !strings.Contains(reply.Text, "questions r1_n_async_1 are still pending") {
		t.Errorf("await_answers = %+v", reply)
	}
	if d, err := c.Permission(ctx, runchannel.PermissionRequest{Tool: "bash"}); err != nil || !d.Allow {
		t.Errorf("permission without a policy = %+v, %v; want allowed", d, err)
	}
}

// A node that is not async has ask_user at most; the async calls are
// refused by the protocol.
func TestChannelOfANodeThatIsNotAsync(t *testing.T) {
	ctx := context.Background()
	s := open(t, (&node{}).task("r1", "n", "none"), runchannel.Options{})
	c := client(t, s)
	if tools, err := c.Tools(ctx); err != nil || len(tools) != 0 {
		t.Errorf("tools = %v, %v; want none", tools, err)
	}
	var ce *runchannel.ChannelError
	if _, err := c.Call(ctx, asktools.AskUserAsync, nil); !errors.As(err, &ce) || ce.Status != 404 || !strings.Contains(ce.Message, "not one of this node's interaction tools (none: the node has interaction: none)") {
		t.Errorf("ask_user_async = %v", err)
	}
	if _, err := c.Pending(ctx); !errors.As(err, &ce) || ce.Status != 409 {
		t.Errorf("pending = %v, want 409", err)
	}
}

// The permission call returns the policy's decision; a policy that fails
// denies.
func TestChannelPermission(t *testing.T) {
	ctx := context.Background()
	var got []runchannel.PermissionRequest
	s := open(t, (&node{}).task("r1", "n", "none"), runchannel.Options{Permission: func(_ context.Context, req runchannel.PermissionRequest) (runchannel.PermissionDecision, error) {
		got = append(got, req)
		switch req.Tool {
		case "bash":
			return runchannel.PermissionDecision{Reason: "bash is denied by this workflow's permission policy"}, nil
		case "broken":
			return runchannel.PermissionDecision{Allow: true}, errors.New("policy store down")
		}
		return runchannel.PermissionDecision{Allow: true}, nil
	}})
	c := client(t, s)
	for _, tc := range []struct {
		tool string
		want runchannel.PermissionDecision
	}{
		{"read", runchannel.PermissionDecision{Allow: true}},
		{"bash", runchannel.PermissionDecision{Reason: "bash is denied by this workflow's permission policy"}},
		{"broken", runchannel.PermissionDecision{Reason: "broken is denied: the permission check failed (policy store down)"}},
	} {
		d, err := c.Permission(ctx, runchannel.PermissionRequest{Tool: tc.tool, Input: json.RawMessage(`{"command":"rm -rf /"}`)})
		if err != nil || d != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.tool, d, err, tc.want)
		}
	}
	if len(got) != 3 || string(got[1].Input) != `{"command":"rm -rf /"}` {
		t.Errorf("the policy saw %+v", got)
	}
	var ce *runchannel.ChannelError
	if _, err := c.Permission(ctx, runchannel.PermissionRequest{}); !errors.As(err, &ce) || ce.Status != 400 {
		t.Errorf("a request without a tool = %v, want 400", err)
	}
}

// A session serves its own run and node, with its own token: a wrong
// token, the token of another run's session, or a call for another run
// or node is refused, and nothing of the node is touched.
func TestChannelRefusesOthers(t *testing.T) {
	ctx := context.Background()
	mine, theirs := &node{}, &node{}
	a := open(t, mine.task("r1", "n", "async"), runchannel.Options{})
	b := open(t, theirs.task("r2", "n", "async"), runchannel.Options{})
	tokenOf := func(s *runchannel.Session) string {
		for _, kv := range s.ChannelEnv() {
			if v, ok := strings.CutPrefix(kv, runchannel.EnvToken+"="); ok {
				return v
			}
		}
		t.Fatal("no token in ChannelEnv")
		return ""
	}
	cases := []struct {
		name   string
		c      *runchannel.Client
		status int
		want   string
	}{
		{"a wrong token", runchannel.NewClient(a.Socket(), "guess", "r1", "n"), 401, "accepts only the token of its session"},
		{"the token of another run's session", runchannel.NewClient(a.Socket(), tokenOf(b), "r2", "n"), 401, "accepts only the token of its session"},
		{"another run", runchannel.NewClient(a.Socket(), tokenOf(a), "r2", "n"), 403, `serves run r1, node n only: the call for run "r2", node "n" is refused`},
		{"another node", runchannel.NewClient(a.Socket(), tokenOf(a), "r1", "other"), 403, `node "other" is refused`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Call(ctx, asktools.AskUserAsync, json.RawMessage(`{"question":"injected?"}`))
			var ce *runchannel.ChannelError
			if !errors.As(err, &ce) || ce.Status != tc.status || !strings.Contains(ce.Message, tc.want) {
				t.Errorf("err = %v, want HTTP %d saying %q", err, tc.status, tc.want)
			}
		})
	}
	if len(mine.questions)+len(theirs.questions) != 0 {
		t.Errorf("a refused call posted questions: %q %q", mine.questions, theirs.questions)
	}
}

// Close ends the calls in flight (their context) and waits for them; a
// call after Close is not served.
func TestChannelCloseEndsCalls(t *testing.T) {
	entered := make(chan struct{})
	s, err := runchannel.Open(context.Background(), (&node{}).task("r1", "n", "human"), runchannel.Options{Binary: testBinary(t), Upstreams: []runchannel.Upstream{},
		Ask: func(ctx context.Context, _ engine.AsyncQuestion) (string, error) {
			close(entered)
			<-ctx.Done()
			return "", ctx.Err()
		}})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, s)
	done := make(chan error, 1)
	go func() {
		reply, err := c.Call(context.Background(), asktools.AskUser, json.RawMessage(`{"question":"Q?"}`))
		if err == nil && !reply.IsError {
			err = fmt.Errorf("the blocked call got an answer after Close: %+v", reply)
		} else {
			err = nil // ended: by the closed connection, or the hook's error
		}
		done <- err
	}()
	<-entered
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
	if _, err := c.Tools(context.Background()); err == nil {
		t.Error("a call after Close was served")
	}
}

func TestClientFromEnv(t *testing.T) {
	_, err := runchannel.ClientFromEnv(func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "ITERION_CHANNEL, ITERION_CHANNEL_TOKEN, ITERION_RUN_ID, ITERION_NODE_ID not set") {
		t.Errorf("err = %v", err)
	}
	env := map[string]string{"ITERION_CHANNEL": "rel/s", "ITERION_CHANNEL_TOKEN": "t", "ITERION_RUN_ID": "r", "ITERION_NODE_ID": "n"}
	if _, err := runchannel.ClientFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "absolute path") {
		t.Errorf("relative socket: err = %v", err)
	}
}

// Without the backend's hook, the node's permission: policy decides, as
// claw's gate does, with the same texts; a call it would hold for a
// person is refused (nobody can be asked), and iterion's own tools pass.
func TestChannelPermissionFromThePolicy(t *testing.T) {
	ctx := context.Background()
	rules := func(list ...string) []permission.Rule {
		r, err := permission.ParseRules(list)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	task := (&node{}).task("r1", "n", "none")
	task.Permission = &permission.Policy{Mode: permission.Off, Deny: rules("Bash(rm *)"), Ask: rules("Write")}
	c := client(t, open(t, task, runchannel.Options{}))
	for _, tc := range []struct {
		tool, input string
		want        runchannel.PermissionDecision
	}{
		{"bash", `{"command":"ls"}`, runchannel.PermissionDecision{Allow: true}},
		{"Bash", `{"command":"rm -rf /"}`, runchannel.PermissionDecision{Reason: permission.RefusedText("the rule Bash(rm *)")}},
		{"write", `{"path":"a"}`, runchannel.PermissionDecision{Reason: permission.RefusedText("the rule Write, which asks a person first, and this backend cannot ask one")}},
		{"mcp__iterion__ask_user", `{"question":"?"}`, runchannel.PermissionDecision{Allow: true}},
		{"Bash", `"not an object"`, runchannel.PermissionDecision{Reason: "Bash is denied: its input is not a JSON object (json: cannot unmarshal string into Go value of type map[string]interface {})"}},
	} {
		d, err := c.Permission(ctx, runchannel.PermissionRequest{Tool: tc.tool, Input: json.RawMessage(tc.input)})
		if err != nil || d != tc.want {
			t.Errorf("%s %s = %+v, %v; want %+v", tc.tool, tc.input, d, err, tc.want)
		}
	}
}
