package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/iterion-bot/iterion/engine"
)

// meeting is an agent that returns its text once the other App's agent
// has started too, so that both Apps run at the same time.
type meeting struct {
	text    string
	started *sync.WaitGroup
}

func (meeting) Capabilities() engine.Capabilities { return engine.Capabilities{} }
func (m meeting) Execute(context.Context, *engine.Task) (*engine.Result, error) {
	m.started.Done()
	m.started.Wait()
	return &engine.Result{Output: map[string]any{"text": m.text}}, nil
}

// Two Apps in one process run at the same time, each with its own
// backends, environment and directory: what one sets reaches neither the
// other nor the process.
func TestAppsKeepTheirOwnSettings(t *testing.T) {
	t.Parallel()
	wf := writeFile(t, "w.bot", "agent a:\n  model: \"anthropic/x\"\nworkflow w:\n  entry: a\n  a -> done\n")
	var started sync.WaitGroup
	started.Add(2)
	type result struct {
		dir, out, errOut string
		code             int
	}
	results := make([]result, 2)
	var done sync.WaitGroup
	for i, name := range []string{"ana", "bo"} {
		c := newCLI(t)
		c.dir = t.TempDir()
		c.setenv("ITERION_STORE", "store-of-"+name) // relative: in c.dir
		c.useBackend(meeting{text: "hello from " + name, started: &started})
		done.Go(func() {
			var out, errOut bytes.Buffer
			code := c.exec(context.Background(), nil, &out, &errOut, "run", wf, "--run-id", name)
			results[i] = result{c.dir, out.String(), errOut.String(), code}
		})
	}
	done.Wait()
	for i, name := range []string{"ana", "bo"} {
		r := results[i]
		if r.code != exitOK || !strings.Contains(r.out, "text: hello from "+name) {
			t.Errorf("%s: exit %d, stdout:\n%s\nstderr:\n%s\nwant its own agent's output", name, r.code, r.out, r.errOut)
		}
		if _, err := os.Stat(filepath.Join(r.dir, "store-of-"+name)); err != nil {
			t.Errorf("%s: its store is not in its directory: %v", name, err)
		}
	}
	if v, ok := os.LookupEnv("ITERION_STORE"); ok && strings.HasPrefix(v, "store-of-") {
		t.Errorf("the process's ITERION_STORE is %q: an App's setting leaked", v)
	}
}
