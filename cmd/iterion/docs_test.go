package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/iterion-bot/iterion/bot/delivery"
	ghbot "github.com/iterion-bot/iterion/bot/github"
	slackbot "github.com/iterion-bot/iterion/bot/slack"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
)

// The serve.yml examples of the docs are files serve accepts as they are.
func TestDocsConfigExamples(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{"../../docs/serve.md", "../../docs/sandbox.md", "../../docs/slack.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := strings.Split(string(b), "```yaml\n")
		if len(blocks) < 2 {
			t.Fatalf("%s has no yaml example", doc)
		}
		for i, block := range blocks[1:] {
			example, _, _ := strings.Cut(block, "```")
			cfg := defaultServeConfig()
			if err := parseServeConfig(doc, []byte(example), &cfg); err != nil {
				t.Errorf("%s, example %d: %v", doc, i+1, err)
			}
		}
	}
}

// unbuilt are the things iterion does not have yet, as the docs and the
// help name them, each with the words that say so: none today, since
// Slack landed. A part named here is one the docs must not present as
// built.
var unbuilt = []struct {
	name    string
	mention func(string) bool
	markers []string
}{}

// paragraphs splits a text at its blank lines.
func paragraphs(text string) []string {
	return strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n")
}

// The README, the docs and every command's help present nothing as there
// that is not built: each paragraph that names Slack also says it is not
// built.
func TestDocsClaimOnlyWhatIsBuilt(t *testing.T) {
	t.Parallel()
	texts := map[string]string{}
	files, _ := filepath.Glob("../../docs/*.md")
	for _, f := range append(files, "../../README.md", "../../deploy/README.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(b)
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		texts[c.CommandPath()+" --help"] = c.Short + "\n\n" + c.Long
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk((&App{}).newRoot())
	// The package comment of the command, which go doc shows.
	b, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	texts["main.go"], _, _ = strings.Cut(string(b), "package main")
	for where, text := range texts {
		for _, p := range paragraphs(text) {
			lower := strings.ToLower(p)
			for _, u := range unbuilt {
				if !u.mention(p) || slices.ContainsFunc(u.markers, func(m string) bool { return strings.Contains(lower, m) }) {
					continue
				}
				t.Errorf("%s presents %s as built:\n%s", where, u.name, p)
			}
			// serve and running workflows are built: nothing says they
			// come later.
			if strings.Contains(lower, "serve") || strings.Contains(lower, " runs ") {
				for _, later := range []string{"to come", "arrive with", "later version", "comes with the github app"} {
					if strings.Contains(lower, later) && !strings.Contains(lower, "backends to come") {
						t.Errorf("%s says %q of what is built:\n%s", where, later, p)
					}
				}
			}
		}
	}
}

// The docs state the defaults as they are declared (config.go, and the
// GitHub App's and the sandbox's packages): each row of serve.md's table of
// keys names its default, and serve.md and sandbox.md say the quota's,
// the limits' and the token name's.
func TestDocsStateTheDefaults(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	serveDoc, sandboxDoc := read("../../docs/serve.md"), read("../../docs/sandbox.md")
	rows := map[string]string{}
	for line := range strings.Lines(serveDoc) {
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "/"), "|") // a \| is inside a cell
		if len(cells) > 4 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[3])
		}
	}
	for key, want := range map[string]string{
		"addr":                   defaultAddr,
		"store":                  defaultStoreDir,
		"shutdown_grace":         durationText(defaultShutdownGrace),
		"retention":              durationText(defaultRetention),
		"log.level":              defaultLogLevel,
		"log.format":             defaultLogFormat,
		"github.git_url":         ghbot.DefaultGitURL,
		"github.workers":         strconv.Itoa(ghbot.DefaultWorkers),
		"github.keep_workspaces": durationText(ghbot.DefaultKeepWorkspaces),
		"sandbox.driver":         defaultSandboxDriver,
		"webhooks.memory_mb":     strconv.Itoa(delivery.DefaultBodyBytes >> 20),
		"webhooks.bodies":        strconv.Itoa(delivery.DefaultBodies),
		"webhooks.body_timeout":  durationText(delivery.DefaultBodyTimeout),
		"slack.transport":        slackbot.TransportHTTP,
		"slack.workers":          strconv.Itoa(slackbot.DefaultWorkers),
	} {
		if got, ok := rows[key]; !ok || !strings.HasPrefix(got, "`"+want+"`") {
			t.Errorf("docs/serve.md gives the default of %s as %q, want `%s`", key, got, want)
		}
	}
	lim := nodesandbox.DefaultLimits()
	for doc, wants := range map[string][]string{
		"docs/serve.md": {"default `" + defaultAPITokenName + "`"},
		"docs/sandbox.md": {
			fmt.Sprintf("`sandbox.workspace_quota_mb` (%d MiB by default", defaultWorkspaceQuotaMB),
			fmt.Sprintf("defaults: %d MiB of memory, %d\n  processes, %d open files", lim.Memory>>20, lim.Processes, lim.OpenFiles),
		},
	} {
		text := serveDoc
		if doc == "docs/sandbox.md" {
			text = sandboxDoc
		}
		for _, want := range wants {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not say %q", doc, want)
			}
		}
	}
}
