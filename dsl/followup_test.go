package dsl

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const followUpHuman = `schema decision:
  approved: bool
  reason: string

schema pick:
  choice: string [enum: "ship", "hold"]

prompt ask:
  Release?

human approve:
  instructions: ask
  output: decision
%s

human choose:
  instructions: ask
  output: pick
%s

workflow gate:
  entry: approve
  approve -> choose
  choose -> done
`

// A human node's and an async agent's reminders, escalation and expiry
// compile to durations and checked defaults.
func TestFollowUpCompiles(t *testing.T) {
	src := strings.Replace(strings.Replace(followUpHuman, "%s", `  remind: "2h"
  escalate:
    after: "8h"
    to: ["@acme/maintainers", "alice"]
  expire: "24h"
  default: {approved: false, reason: "nobody answered"}`, 1), "%s", `  expire: "1h"
  default: hold`, 1)
	w, ds := CompileSource("t.bot", []byte(src))
	if ds.HasErrors() {
		t.Fatal(RenderString(ds, map[string][]byte{"t.bot": []byte(src)}))
	}
	want := &FollowUp{Remind: 2 * time.Hour, EscalateAfter: 8 * time.Hour, EscalateTo: []string{"@acme/maintainers", "alice"},
		Expire: 24 * time.Hour, Default: map[string]string{"approved": "false", "reason": "nobody answered"}}
	if diff := cmp.Diff(want, w.Node("approve").FollowUp); diff != "" {
		t.Errorf("approve's follow-up (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&FollowUp{Expire: time.Hour, Default: map[string]string{"choice": "hold"}}, w.Node("choose").FollowUp); diff != "" {
		t.Errorf("choose's follow-up (-want +got):\n%s", diff)
	}
	if w.Node("approve").FollowUp == nil || w.Hash == "" {
		t.Fatal("no follow-up")
	}
}

// Every mistake is reported, with what to write instead.
func TestFollowUpMistakes(t *testing.T) {
	for _, tc := range []struct {
		name, approve, choose, want string
	}{
		{"remind after expiry", `  remind: "30h"
  expire: "24h"`, "", `remind 30h0m0s on human "approve" comes when the question has already expired`},
		{"escalation in days", `  escalate: {after: "2d", to: [alice]}`, "", `escalate after of human "approve" is "2d"`},
		{"escalation after expiry", `  escalate: {after: "30h", to: [alice]}
  expire: "24h"
  default: {approved: false, reason: "late"}`, "", `escalate after 30h0m0s on human "approve" comes when the question has already expired`},
		{"escalation without to", `  escalate: {after: "2h"}`, "", `needs both after: and to:`},
		{"escalation to a bad name", `  escalate: {after: "2h", to: ["-bob", "@acme"]}`, "", `escalate to "-bob" of human "approve" is neither a GitHub login nor an @org/team`},
		{"escalation with another key", `  escalate: {after: "2h", to: [alice], cc: [bob]}`, "", `has no key "cc"`},
		{"default without expire", `  default: {approved: true, reason: "ok"}`, "", `default on human "approve" without expire`},
		{"default missing a field", `  expire: "1h"
  default: {approved: true}`, "", `gives no reason`},
		{"default of an unknown field", `  expire: "1h"
  default: {approved: true, reason: "x", extra: 1}`, "", `gives "extra", which is not a field of decision`},
		{"default as text for two fields", `  expire: "1h"
  default: "yes"`, "", `must give each field of decision`},
		{"default outside the enum", "", `  expire: "1h"
  default: maybe`, `default choice of human "choose" is "maybe": not one of the field's options`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(strings.Replace(followUpHuman, "%s", tc.approve, 1), "%s", tc.choose, 1)
			_, ds := CompileSource("t.bot", []byte(src))
			out := RenderString(ds, map[string][]byte{"t.bot": []byte(src)})
			if !strings.Contains(out, tc.want) || !strings.Contains(out, "C270") || !strings.Contains(out, "fix:") {
				t.Errorf("got:\n%s\nwant C270 saying %q, with a fix", out, tc.want)
			}
		})
	}
}

func TestValidAnswerer(t *testing.T) {
	for who, want := range map[string]bool{
		"alice": true, "a-b": true, "@acme/maintainers": true, "@acme/core_team": true,
		"": false, "-a": false, "a-": false, "@acme": false, "@/x": false, "a_b": false, "@acme/x/y": false, "al ice": false,
	} {
		if got := validAnswerer(who); got != want {
			t.Errorf("validAnswerer(%q) = %v, want %v", who, got, want)
		}
	}
}
