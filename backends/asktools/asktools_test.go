package asktools_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/engine"
)

func TestFor(t *testing.T) {
	cases := []struct {
		name        string
		interaction string
		want        []string
	}{
		{name: "no interaction", interaction: "", want: nil},
		{name: "none", interaction: "none", want: nil},
		{name: "human", interaction: "human", want: []string{"ask_user"}},
		{name: "llm_or_human", interaction: "llm_or_human", want: []string{"ask_user"}},
		{name: "async", interaction: "async", want: []string{"ask_user", "ask_user_async", "await_answers"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, tool := range asktools.For(tc.interaction) {
				got = append(got, tool.Name)
				if tool.Description == "" || tool.Schema["type"] != "object" {
					t.Errorf("%s: description %q, schema type %v", tool.Name, tool.Description, tool.Schema["type"])
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
		})
	}
}

// Each call builds the schemas anew, so a caller that changes one does
// not change another's.
func TestForSchemasAreFresh(t *testing.T) {
	a := asktools.For("async")
	a[0].Schema["type"] = "changed"
	if b := asktools.For("async"); b[0].Schema["type"] != "object" {
		t.Errorf("schema type = %v after another caller changed its copy", b[0].Schema["type"])
	}
}

func TestQuestion(t *testing.T) {
	yes := true
	long := strings.Repeat("x", asktools.MaxOptionLabel+1)
	many := make([]any, asktools.MaxOptions+3)
	for i := range many {
		many[i] = map[string]any{"id": "o", "label": "L"}
	}
	cases := []struct {
		name  string
		input map[string]any
		want  engine.AsyncQuestion
	}{
		{name: "trimmed", input: map[string]any{"question": "  Which DB? \n"}, want: engine.AsyncQuestion{Question: "Which DB?"}},
		{name: "not a string", input: map[string]any{"question": 42}, want: engine.AsyncQuestion{}},
		{name: "options, malformed dropped", input: map[string]any{"question": "Q", "options": []any{
			map[string]any{"id": "a", "label": "A"}, map[string]any{"id": "", "label": "B"}, "c",
			map[string]any{"id": "d", "label": long}, map[string]any{"id": "e", "label": "E"},
		}, "allow_free_text": true}, want: engine.AsyncQuestion{Question: "Q", Options: []engine.Option{{ID: "a", Label: "A"}, {ID: "e", Label: "E"}}, AllowFreeText: &yes}},
		{name: "options bounded", input: map[string]any{"question": "Q", "options": many}, want: engine.AsyncQuestion{Question: "Q", Options: func() []engine.Option {
			o := make([]engine.Option, asktools.MaxOptions)
			for i := range o {
				o[i] = engine.Option{ID: "o", Label: "L"}
			}
			return o
		}()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, asktools.Question(tc.input)); diff != "" {
				t.Errorf("Question (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := asktools.Ask(map[string]any{"question": " "}); err == nil || !strings.Contains(err.Error(), "ask_user needs a question") {
		t.Errorf("Ask(empty) = %v, want the empty-question error", err)
	}
}

// node is an async node's closures over an in-memory list of questions.
type node struct {
	posted  []engine.AsyncQuestion
	pending []engine.PendingQuestion
	inbox   []string
}

func (n *node) task() *engine.Task {
	return &engine.Task{
		Interaction: "async",
		PostQuestion: func(_ context.Context, q engine.AsyncQuestion) (string, error) {
			if q.Question == "boom" {
				return "", errors.New("store is full")
			}
			n.posted = append(n.posted, q)
			return "r_n_async_1", nil
		},
		PendingQuestions: func(context.Context) ([]engine.PendingQuestion, error) { return n.pending, nil },
		CollectAnswers:   func(context.Context) (string, error) { return "Answers:\n- r_n_async_1: Postgres", nil },
		InboxDrain: func(context.Context) ([]string, error) {
			msgs := n.inbox
			n.inbox = nil
			return msgs, nil
		},
	}
}

func TestPost(t *testing.T) {
	n := &node{}
	text, err := asktools.Post(context.Background(), n.task(), map[string]any{"question": "Which DB?"})
	if err != nil {
		t.Fatal(err)
	}
	if want := asktools.PostedText + " (question id: r_n_async_1)"; text != want {
		t.Errorf("text = %q, want %q", text, want)
	}
	if len(n.posted) != 1 || n.posted[0].Question != "Which DB?" {
		t.Errorf("posted = %+v", n.posted)
	}
	for _, tc := range []struct {
		name  string
		task  *engine.Task
		input map[string]any
		want  string
	}{
		{name: "empty", task: n.task(), input: map[string]any{}, want: "question is empty: ask_user_async needs a question"},
		{name: "store fails", task: n.task(), input: map[string]any{"question": "boom"}, want: "posting the question: store is full"},
		{name: "fan-out branch", task: &engine.Task{}, input: map[string]any{"question": "Q"}, want: "inside a fan-out branch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := asktools.Post(context.Background(), tc.task, tc.input)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestAwait(t *testing.T) {
	n := &node{pending: []engine.PendingQuestion{{InteractionID: "r_n_async_1", Question: "Which DB?"}}}
	text, pending, err := asktools.Await(context.Background(), n.task())
	if err != nil || text != "" || len(pending) != 1 {
		t.Fatalf("Await with a question pending = %q, %v, %v; want its pending list", text, pending, err)
	}
	n.pending = nil
	n.inbox = []string{"[Answer to question r_n_async_1] Q: \"Which DB?\" — A: Postgres", "also: keep the tests green"}
	text, pending, err = asktools.Await(context.Background(), n.task())
	if err != nil || len(pending) != 0 {
		t.Fatal(pending, err)
	}
	if want := "Answers:\n- r_n_async_1: Postgres\n\nOperator messages:\nalso: keep the tests green"; text != want {
		t.Errorf("text = %q, want %q", text, want)
	}
	if len(n.inbox) != 0 {
		t.Errorf("inbox not drained: %q", n.inbox)
	}
	if _, _, err := asktools.Await(context.Background(), &engine.Task{}); err == nil || !strings.Contains(err.Error(), "fan-out branch") {
		t.Errorf("Await without closures = %v", err)
	}
}
