package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/iterion-bot/iterion/bot/delivery"
	ghbot "github.com/iterion-bot/iterion/bot/github"
	slackbot "github.com/iterion-bot/iterion/bot/slack"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

// slackFile is Slack's part of the config file.
type slackFile struct {
	// Transport is http (the Events API on a public URL) or socket
	// (Socket Mode).
	Transport string `yaml:"transport"`
	// Channel is where the runs not started from a repository are shown
	// (#name, name or an id); a repository's runs go where its
	// .iterion.yml says.
	Channel string `yaml:"channel"`
	// Users maps Slack user ids to GitHub logins.
	Users map[string]string `yaml:"users"`
	// Allowed are the GitHub logins that may start runs from Slack and
	// answer the questions of runs no repository covers.
	Allowed []string `yaml:"allowed"`
	// Workflows are the workflows /iterion run starts, by name: .bot files,
	// relative to the config file's directory.
	Workflows map[string]string `yaml:"workflows"`
	// Workers is how many Slack deliveries are handled at once.
	Workers int `yaml:"workers"`
}

// slackConfig is Slack's settings, from the environment and the file.
type slackConfig struct {
	file              slackFile
	botToken, secret  string
	appToken, apiURL  string
	transport         string
	redact            *engine.Redactor
	gitURL, fileNamed string
	// signIn, when set, lets people link their accounts by signing in to
	// GitHub; ghAPI is GitHub's REST base for it.
	signIn *slackbot.SignIn
}

// slackSettings completes Slack's settings from the file with the
// environment, which alone holds the tokens. ok is false when Slack is
// off (no bot token). What is missing for the transport chosen is named.
// public and clientID are the server's public address and the App's OAuth
// client id, with which Slack users link their accounts by signing in.
func (a *App) slackSettings(f slackFile, file, public, clientID string) (cfg slackConfig, ok bool, err error) {
	cfg.file, cfg.fileNamed = f, file
	cfg.botToken = strings.TrimSpace(a.getenv("ITERION_SLACK_BOT_TOKEN"))
	if cfg.botToken == "" {
		return cfg, false, nil
	}
	cfg.secret = a.getenv("ITERION_SLACK_SIGNING_SECRET")
	cfg.appToken = strings.TrimSpace(a.getenv("ITERION_SLACK_APP_TOKEN"))
	cfg.apiURL = a.getenv("ITERION_SLACK_API_URL")
	cfg.transport = cmp.Or(f.Transport, slackbot.TransportHTTP)
	switch {
	case !strings.HasPrefix(cfg.botToken, "xoxb-"):
		return cfg, false, errors.New("ITERION_SLACK_BOT_TOKEN is not a bot token: set it to the app's Bot User OAuth Token, which starts with xoxb-")
	case cfg.transport == slackbot.TransportSocket && !strings.HasPrefix(cfg.appToken, "xapp-"):
		return cfg, false, errors.New("slack.transport is socket, which needs ITERION_SLACK_APP_TOKEN: set it to an app-level token (xapp-…, scope connections:write), or use slack.transport: http")
	case cfg.transport == slackbot.TransportHTTP && cfg.secret == "":
		return cfg, false, errors.New("Slack over HTTP needs ITERION_SLACK_SIGNING_SECRET: set it to the app's signing secret (its Basic Information page), or use slack.transport: socket")
	}
	if cfg.apiURL != "" {
		if msg := checkURL("ITERION_SLACK_API_URL", cfg.apiURL, "https://slack.example.com/api/"); msg != "" {
			return cfg, false, errors.New(msg)
		}
		cfg.apiURL = strings.TrimRight(cfg.apiURL, "/") + "/"
	}
	id, secret := clientID, a.getenv("ITERION_GITHUB_CLIENT_SECRET")
	switch {
	case id == "" && secret == "":
	case id == "" || secret == "":
		return cfg, false, errors.New("linking Slack accounts by signing in to GitHub needs both ITERION_GITHUB_CLIENT_ID (or github.client_id) and ITERION_GITHUB_CLIENT_SECRET (the GitHub App's settings page); set both, or neither to map people with slack.users")
	case public == "":
		return cfg, false, errors.New("linking Slack accounts by signing in to GitHub needs ITERION_PUBLIC_URL (or page.public_url), the server's address as browsers reach it: GitHub sends people back to its /auth/github/callback (the App's Callback URL)")
	default:
		cfg.signIn = &slackbot.SignIn{ClientID: id, ClientSecret: secret, PublicURL: public}
	}
	return cfg, true, nil
}

// newSlackService wires Slack's part of serve over the store of o:
// made before the engine, whose events wake its relay; served by Run once
// the engine exists. Repositories' runs are checked by gh (nil without a
// GitHub App).
func (a *App) newSlackService(ctx context.Context, cfg slackConfig, o *owner, gh *ghbot.Service, bodies *delivery.Bodies, log *slog.Logger) (*slackbot.Service, error) {
	opts := slackbot.ServiceOptions{
		BotToken: cfg.botToken, SigningSecret: cfg.secret, AppToken: cfg.appToken, APIURL: cfg.apiURL, Transport: cfg.transport,
		Channel: cfg.file.Channel, Users: cfg.file.Users, Allowed: cfg.file.Allowed, GitURL: cfg.gitURL,
		Workflows: cfg.file.Workflows, Launch: a.slackLaunch(o), Workers: cfg.file.Workers, Pace: a.WritePace, SignIn: cfg.signIn,
		Redactor: cfg.redact, Bodies: bodies, Log: log, Failpoint: a.failpoint(),
	}
	if cfg.transport == slackbot.TransportSocket {
		opts.SigningSecret = ""
	} else {
		opts.AppToken = ""
	}
	if gh != nil {
		opts.GitHub = gh
	}
	s, err := slackbot.NewService(ctx, o.db, opts)
	var auth *slackbot.AuthError
	if errors.As(err, &auth) {
		return nil, auth
	}
	if err != nil {
		return nil, fmt.Errorf("starting Slack: %w (check ITERION_SLACK_API_URL and the network)", err)
	}
	return s, nil
}

// slackLaunch starts the runs asked for with /iterion run: a workflow of
// the server's configuration, compiled from its file and launched through
// the engine, in a workspace of its own. What the person can fix comes
// back as a *slack.LaunchError.
func (a *App) slackLaunch(o *owner) func(ctx context.Context, l slackbot.Launch) (*engine.Run, error) {
	return func(ctx context.Context, l slackbot.Launch) (*engine.Run, error) {
		src, err := a.readWorkflow(l.File)
		if err != nil {
			return nil, &slackbot.LaunchError{Msg: fmt.Sprintf("the server cannot read its file %s: %v", l.File, err)}
		}
		w, ds := dsl.CompileSource(l.File, src)
		if ds.HasErrors() {
			return nil, &slackbot.LaunchError{Msg: fmt.Sprintf("%s has errors:\n%s", l.File, dsl.RenderString(ds, map[string][]byte{l.File: src}))}
		}
		vars := map[string]any{}
		for k, v := range l.Vars {
			vars[k] = v
		}
		run, err := o.engine.Launch(ctx, engine.StartRequest{Workflow: w, RunID: l.RunID, Vars: vars, Trigger: l.Trigger, Channels: l.Channels, File: l.File})
		var verr *engine.VarsError
		var preset *engine.PresetError
		var pre *engine.PreflightError
		switch {
		case errors.As(err, &verr), errors.As(err, &preset):
			return nil, &slackbot.LaunchError{Msg: err.Error()}
		case errors.As(err, &pre):
			return nil, &slackbot.LaunchError{Msg: "this server cannot run it: " + err.Error()}
		}
		return run, err
	}
}

// serveSlack mounts Slack's HTTP endpoints on mux when its transport is
// HTTP.
func serveSlack(mux *http.ServeMux, s *slackbot.Service) {
	if s.Transport() != slackbot.TransportHTTP {
		return
	}
	mux.Handle("POST /webhooks/slack/events", s.Events())
	mux.Handle("POST /webhooks/slack/interactive", s.Interactive())
	mux.Handle("POST /webhooks/slack/commands", s.Commands())
}

// serveSignIn mounts the GitHub sign-in's callback, when people link
// their accounts themselves. The callback is shared with the admin page's
// sign-in (fallback): a state of Slack's links goes to Slack, any other
// to the page.
func serveSignIn(mux *http.ServeMux, s *slackbot.Service, fallback http.Handler) {
	cb := s.Callback()
	if cb == nil {
		return
	}
	mux.HandleFunc("GET "+slackbot.CallbackPath, func(w http.ResponseWriter, r *http.Request) {
		if s.OwnsState(r.URL.Query().Get("state")) {
			cb.ServeHTTP(w, r)
			return
		}
		fallback.ServeHTTP(w, r)
	})
}

// slackUserID and slackChannel are the shapes of the ids and names the
// file holds: a user's id (U…, W… on Enterprise Grid), a channel's id or
// name (lower case, digits, - and _, at most 80).
var (
	slackUserID  = regexp.MustCompile(`^[UW][A-Z0-9]{1,20}$`)
	slackChannel = regexp.MustCompile(`^(#?[a-z0-9][a-z0-9._-]{0,79}|[CGD][A-Z0-9]{2,})$`)
	workflowName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)
