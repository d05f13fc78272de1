package engine

import (
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/dsl"
	"time"
)

// An async question whose node's default is not among the options it
// offers options-only is refused at once, saying what to offer; one that
// takes other words, or offers the default, is posted.
func TestAsyncDefaultCheckedWhenAsked(t *testing.T) {
	n := &dsl.Node{ID: "draft", Kind: dsl.NodeAgent, FollowUp: &dsl.FollowUp{Default: map[string]string{dsl.AsyncDefaultKey: "MIT"}}}
	no, yes := false, true
	opts := []Option{{ID: "apache", Label: "Apache-2.0"}, {ID: "gpl", Label: "GPL-3.0"}}
	err := checkAsyncDefault(n, AsyncQuestion{Question: "Licence?", Options: opts, AllowFreeText: &no})
	if err == nil || !strings.Contains(err.Error(), `"MIT", which is not one of its options (Apache-2.0, GPL-3.0)`) {
		t.Errorf("a default outside the options: %v", err)
	}
	for _, q := range []AsyncQuestion{
		{Question: "Licence?", Options: opts, AllowFreeText: &yes},
		{Question: "Licence?", Options: opts},
		{Question: "Licence?", Options: append(opts, Option{ID: "mit", Label: "MIT"}), AllowFreeText: &no},
		{Question: "Licence?"},
	} {
		if err := checkAsyncDefault(n, q); err != nil {
			t.Errorf("%+v: %v", q, err)
		}
	}
	if f := followUpOf(n, time.Time{}); f.Default[QuestionKey] != "MIT" {
		t.Errorf("the async default reaches the answer's key: %+v", f.Default)
	}
}
