package dsl

import (
	"slices"
	"strings"
	"testing"
)

// answer_on names the channels a node's questions may be answered on,
// answerers the GitHub logins who may answer them; a channel iterion does
// not have, no channel at all, or a name that is no login is refused
// with what to write.
func TestAnswerOn(t *testing.T) {
	src := `prompt p:
  Work.

agent plan:
  model: "anthropic/x"
  user: p
  answer_on: [github, page, github]
  answerers: [ana, "bo-2"]

human approve:
  instructions: "Ship?"
  answer_on: slack

agent free:
  model: "anthropic/x"
  user: p

workflow w:
  entry: plan
  plan -> approve
  approve -> free
  free -> done
`
	w, ds := CompileSource("t.bot", []byte(src))
	if ds.HasErrors() {
		t.Fatal(RenderString(ds, map[string][]byte{"t.bot": []byte(src)}))
	}
	if got := w.Node("plan"); !slices.Equal(got.AnswerOn, []string{"github", "page"}) || !slices.Equal(got.Answerers, []string{"ana", "bo-2"}) {
		t.Errorf("plan: answer_on %q, answerers %q", got.AnswerOn, got.Answerers)
	}
	if got := w.Node("approve").AnswerOn; !slices.Equal(got, []string{"slack"}) {
		t.Errorf("approve: answer_on %q", got)
	}
	if got := w.Node("free"); got.AnswerOn != nil || got.Answerers != nil {
		t.Errorf("free: answer_on %q, answerers %q: want every channel and everyone", got.AnswerOn, got.Answerers)
	}

	for _, tc := range []struct{ name, prop, want string }{
		{"unknown channel", "answer_on: [github, email]", `answer_on names "email", which is not a channel`},
		{"no channel", "answer_on: []", "answer_on names no channel"},
		{"not a login", `answerers: ["ana; rm -rf"]`, `answerers names "ana; rm -rf", which is not a GitHub login`},
		{"hyphen first", `answerers: ["-ana"]`, "not a GitHub login"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(src, "  answer_on: [github, page, github]\n", "  "+tc.prop+"\n", 1)
			_, ds := CompileSource("t.bot", []byte(bad))
			text := RenderString(ds, map[string][]byte{"t.bot": []byte(bad)})
			if !ds.HasErrors() || !strings.Contains(text, tc.want) || !strings.Contains(text, string(ErrInvalidValue)) {
				t.Errorf("%s: got %s; want an %s error saying %q", tc.prop, text, ErrInvalidValue, tc.want)
			}
		})
	}
	// A router has no questions: answer_on is not one of its properties.
	bad := strings.Replace(src, "agent free:\n", "router r:\n  mode: fan_out_all\n  answer_on: [github]\n\nagent free:\n", 1)
	_, ds = CompileSource("t.bot", []byte(bad))
	if text := RenderString(ds, map[string][]byte{"t.bot": []byte(bad)}); !strings.Contains(text, string(ErrUnknownProp)) || !strings.Contains(text, "answer_on") {
		t.Errorf("answer_on on a router: %s; want %s", text, ErrUnknownProp)
	}
}
