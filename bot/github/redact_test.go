package github

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

// The relay's comments and check runs are scrubbed by the Commenter
// itself, even of a run whose records hold secrets (written before
// scrubbing existed, or by a store the engine did not scrub): its
// question, its error and its artifact.
func TestRelayScrubsSecrets(t *testing.T) {
	const secret = "sk-ant-api03-s3cr3t-0123456789"
	world := newWorld(t)
	db, fake := world.db, world.fake
	ctx := context.Background()
	run := createPRRun(t, db, "leak-1")
	if _, err := db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, NodeID: "review", Questions: map[string]any{engine.QuestionKey: "Is " + secret + " the key?"}}); err != nil {
		t.Fatal(err)
	}
	ck, _ := json.Marshal(map[string]any{"v": 1, "ir": dsl.IRVersion, "node": dsl.TargetFail, "outputs": map[string]any{},
		"artifacts": map[string]any{"report": []any{map[string]any{"text": "found " + secret}}}})
	if err := db.Commit(ctx, engine.Change{RunID: run.ID, Status: engine.StatusFailed, FailureCode: engine.CodeExecutionFailed,
		Error: "command exited with status 1: key=" + secret, Checkpoint: ck,
		Outbox: []engine.OutboxRow{{Kind: engine.OutboxRunFailed, RunID: run.ID, Channels: []string{"github"}}}}); err != nil {
		t.Fatal(err)
	}
	replies := world.commenter()
	replies.redactor = engine.NewRedactor(secret)
	relay := world.relay(t, replies)
	relay.Drain(ctx)

	var posted []string
	for _, c := range fake.BotComments(7, "") {
		posted = append(posted, c.Body)
	}
	for _, c := range fake.CheckRuns() {
		posted = append(posted, c.Title+"\n"+c.Summary)
	}
	all := strings.Join(posted, "\n----\n")
	if len(posted) != 3 || strings.Contains(all, secret) {
		t.Fatalf("%d posts (want a status comment, a question and a check run), or a secret among them:\n%s", len(posted), all)
	}
	for _, want := range []string{"> Is [redacted] the key?", "key=[redacted]", `"text": "found [redacted]"`} {
		if n := strings.Count(all, want); n < 1 {
			t.Errorf("the posts lack %q:\n%s", want, all)
		}
	}
	if rows, _ := db.DueOutbox(ctx, world.clock.Now().Add(time.Hour), 0); len(rows) != 0 {
		t.Errorf("outbox rows left: %s", fmt.Sprint(rows))
	}
}
