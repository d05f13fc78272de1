package github

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

// Launcher starts the runs the Handler asks for: it reads the workflow
// from the repository's default branch (never from the pull request, whose
// author could otherwise rewrite what runs with the repository's secrets),
// checks the PR's commit out into a workspace of the run's own, and hands
// the run to Start.
type Launcher struct{ o LauncherOptions }

// LauncherOptions configure a Launcher; every field is required but Check.
type LauncherOptions struct {
	// Fetch reads a file of the repository at a ref (the contents API).
	Fetch func(ctx context.Context, installationID int64, owner, repo, path, ref string) ([]byte, error)
	// Token returns an installation token for the checkout.
	Token func(ctx context.Context, installationID int64) (string, error)
	// CloneURL returns the git URL of owner/repo.
	CloneURL func(owner, repo string) string
	// Workspaces is the directory the runs' workspaces are made in.
	Workspaces string
	// Exists reports whether a run id is taken.
	Exists func(ctx context.Context, runID string) (bool, error)
	// Check, when set, tells whether this server can run the workflow (its
	// backends and their keys) before the checkout.
	Check func(w *dsl.Workflow) error
	// Start launches the run (engine.Launch): it returns once the run's
	// record is stored, and the run executes in the background.
	Start func(ctx context.Context, req engine.StartRequest) (*engine.Run, error)
	// DSL compiles the workflows (the environment they may read).
	DSL dsl.Options
	// Slack says the server has Slack: a run whose repository names a
	// Slack channel is shown there too (its Channels hold "slack").
	Slack bool
}

// NewLauncher returns the launcher o describes.
func NewLauncher(o LauncherOptions) *Launcher { return &Launcher{o: o} }

// RunID is the run id a launch key gives: the same request handled twice
// names the same run.
func RunID(owner, repo, key string) string {
	sum := sha256.Sum256([]byte(owner + "/" + repo + "\x00" + key))
	return "gh-" + hex.EncodeToString(sum[:10])
}

// Launch checks out l.Ref, compiles l.Path and starts the run, returning
// its id. A launch whose key already started a run returns that run.
func (ln *Launcher) Launch(ctx context.Context, l Launch) (string, error) {
	id := RunID(l.Owner, l.Repo, l.Key)
	if ok, err := ln.o.Exists(ctx, id); err != nil || ok {
		return id, err
	}
	rel, err := workflowPath(l.Path)
	if err != nil {
		return "", &LaunchError{Msg: err.Error()}
	}
	src, err := ln.o.Fetch(ctx, l.InstallationID, l.Owner, l.Repo, rel, l.DefaultBranch)
	if errors.Is(err, ErrNoFile) {
		return "", &LaunchError{Msg: fmt.Sprintf("%s is not on the default branch `%s`", l.Path, l.DefaultBranch)}
	}
	if err != nil {
		var later *RetryLater
		if errors.As(err, &later) {
			return "", err
		}
		return "", &LaunchError{Msg: err.Error()}
	}
	w, ds := ln.o.DSL.CompileSource(rel, src)
	if ds.HasErrors() {
		return "", &LaunchError{Msg: fmt.Sprintf("%s on `%s` does not compile:\n\n```\n%s```", l.Path, inert(l.DefaultBranch), unfenced(dsl.RenderString(ds, map[string][]byte{rel: src})))}
	}
	given := map[string]any{}
	for k, v := range l.Vars {
		given[k] = v
	}
	for k, v := range l.Context {
		if _, set := given[k]; !set && w.Var(k) != nil {
			given[k] = v
		}
	}
	// Refused before the checkout, in the commenter's words.
	vars, err := engine.ResolveVars(w, given, "")
	if err != nil {
		return "", &LaunchError{Msg: launchRefusal(err)}
	}
	if ln.o.Check != nil {
		if err := ln.o.Check(w); err != nil {
			return "", &LaunchError{Msg: launchRefusal(err)}
		}
	}
	token, err := ln.o.Token(ctx, l.InstallationID)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(ln.o.Workspaces, 0o700); err != nil {
		return "", fmt.Errorf("making the workspaces directory: %w", err)
	}
	dir := filepath.Join(ln.o.Workspaces, id)
	// A checkout a crash interrupted is started again from nothing.
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("clearing workspace %s: %w", dir, err)
	}
	if err := Checkout(ctx, dir, ln.o.CloneURL(l.Owner, l.Repo), l.Ref, l.Context["base_ref"], token); err != nil {
		os.RemoveAll(dir)
		if ctx.Err() != nil {
			return "", err
		}
		// Said to the commenter: a commit gone from a force-pushed branch,
		// a repository the App cannot read.
		return "", &LaunchError{Msg: fmt.Sprintf("fetching commit %s failed: %v", shortSHA(l.Ref), err)}
	}
	// The workflow as read from the default branch, beside the checkout,
	// so a run a restart interrupted continues with what it started with.
	file := dir + ".bot"
	_ = os.Remove(file)
	if err := os.WriteFile(file, src, 0o400); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("saving the workflow of run %s: %w", id, err)
	}
	origin := Origin{Repo: l.Owner + "/" + l.Repo, PR: l.PR, CommentID: l.CommentID, Installation: l.InstallationID, HeadSHA: l.Ref,
		Schedule: l.Schedule, Tick: l.Tick, Issue: l.Issue}
	channels := []string{"github"}
	if ln.o.Slack && l.Slack != "" {
		origin.Slack = l.Slack
		channels = append(channels, "slack")
	}
	_, err = ln.o.Start(ctx, engine.StartRequest{
		Workflow: w, RunID: id, Vars: vars,
		Trigger:  origin.Trigger(l.Actor),
		Channels: channels,
		WorkDir:  dir,
		File:     file,
	})
	switch {
	case errors.Is(err, engine.ErrRunExists):
		return id, nil // the same request, handled twice
	case err != nil:
		var pre *engine.PreflightError
		var verr *engine.VarsError
		if errors.As(err, &pre) || errors.As(err, &verr) {
			return "", &LaunchError{Msg: launchRefusal(err)}
		}
		return "", err
	}
	return id, nil
}

// launchRefusal phrases the engine's refusal of a launch for the person
// who wrote the /iterion run comment: what to write, never a flag of the
// command line.
func launchRefusal(err error) string {
	var verr *engine.VarsError
	var pre *engine.PreflightError
	switch {
	case errors.As(err, &verr):
		var lines []string
		for _, p := range verr.Problems {
			switch p.Kind {
			case engine.ProblemMissing:
				lines = append(lines, fmt.Sprintf("- var `%s` (%s) is required: add `%s=…` to the command", p.Name, p.Type, p.Name))
			case engine.ProblemUnknown:
				lines = append(lines, fmt.Sprintf("- `%s` is not a var of this workflow", inert(p.Name)))
			default:
				lines = append(lines, fmt.Sprintf("- var `%s` (%s): %s", inert(p.Name), p.Type, plain(p.Detail, 300)))
			}
		}
		if len(verr.Declared) > 0 {
			lines = append(lines, "", "The workflow's vars: "+strings.Join(verr.Declared, ", ")+".")
		}
		return "its vars are not right:\n" + strings.Join(lines, "\n")
	case !errors.As(err, &pre):
		return "this server cannot run it: " + plain(err.Error(), 500)
	default:
		var lines []string
		for _, p := range pre.Problems {
			var b *engine.BackendUnavailableError
			if errors.As(p, &b) && b.Detail == "" {
				avail := "none"
				if len(b.Available) > 0 {
					avail = strings.Join(b.Available, ", ")
				}
				lines = append(lines, fmt.Sprintf("- node `%s` runs on backend `%s`, which this server does not have (it has: %s)", b.Node, b.Backend, avail))
				continue
			}
			lines = append(lines, "- "+p.Error())
		}
		return "this server cannot run it:\n" + strings.Join(lines, "\n")
	}
}

// workflowPath checks a workflow path from .iterion.yml: relative, inside
// the repository, a .bot or .iter file.
func workflowPath(p string) (string, error) {
	clean := path.Clean(p)
	switch {
	case p == "" || path.IsAbs(p) || clean == ".." || strings.HasPrefix(clean, "../"):
		return "", fmt.Errorf("workflow path %q must be a file inside the repository", p)
	case path.Ext(clean) != ".bot" && path.Ext(clean) != ".iter":
		return "", fmt.Errorf("workflow path %q must name a .bot or .iter file", p)
	}
	return clean, nil
}
