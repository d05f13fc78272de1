package slack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/bot/delivery"
	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// Transports: how Slack's events and interactions reach the server.
const (
	// TransportHTTP is the Events API and interactivity over HTTP, on a
	// public URL: every request signed with the signing secret.
	TransportHTTP = "http"
	// TransportSocket is Socket Mode: a WebSocket the server opens with
	// the app-level token, behind any firewall.
	TransportSocket = "socket"
)

// DefaultWorkers is how many deliveries are handled at once.
const DefaultWorkers = 4

// DefaultCommand is the slash command's name.
const DefaultCommand = "/iterion"

// ServiceOptions configure a Service. A zero optional field means the
// default it names.
type ServiceOptions struct {
	// BotToken (xoxb-…) is required. SigningSecret is required over HTTP,
	// AppToken (xapp-…) in Socket Mode.
	BotToken, SigningSecret, AppToken string
	// APIURL is the Web API's base ("" means Slack's).
	APIURL string
	// Transport is TransportHTTP ("" too) or TransportSocket.
	Transport string
	// Channel is where the runs not started from a repository are shown
	// (started from the API, the CLI's server, a schedule); "" leaves them
	// out of Slack.
	Channel string
	// Users maps Slack user ids to GitHub logins; Allowed are the GitHub
	// logins that may start runs from Slack and answer the questions of
	// runs no repository covers (People).
	Users   map[string]string
	Allowed []string
	// GitHub checks the answers to repositories' runs; nil without a
	// GitHub App (they are refused).
	GitHub RepoPermissions
	// GitURL is GitHub's web base, for links and sign-in; "" means
	// github.com.
	GitURL string
	// SignIn, when set, lets people link their Slack accounts to their
	// GitHub accounts themselves, by signing in to GitHub (/iterion link;
	// the callback is Callback's); without it, slack.users maps them.
	SignIn *SignIn
	// Workflows are what /iterion run starts, by name; Launch starts them.
	// Without Launch, /iterion run is refused.
	Workflows map[string]string
	Launch    func(ctx context.Context, l Launch) (*engine.Run, error)
	// Command is the slash command's name; "" means DefaultCommand.
	Command string
	// Workers is how many deliveries are handled at once; 0 means
	// DefaultWorkers.
	Workers int
	// Pace spaces the posts in one channel; 0 means DefaultPace.
	Pace time.Duration
	// StatusEvery bounds a card's updates for progress; 0 means 10 s.
	StatusEvery time.Duration
	// Redactor scrubs the server's secrets from every message; nil means
	// nothing is scrubbed.
	Redactor *engine.Redactor
	// Bodies is the pool the HTTP requests' bodies are read into, shared
	// with the server's other channels; nil means one of the Service's own.
	Bodies *delivery.Bodies
	// HTTPClient carries the Web API's requests; nil means
	// http.DefaultClient.
	HTTPClient *http.Client
	// Log receives the Service's logs; nil means none.
	Log *slog.Logger
	// Failpoint, when set, is called at the named points of the worker and
	// the relay, for crash tests.
	Failpoint func(name string)
}

// SignIn is the GitHub App's user sign-in, for account links.
type SignIn struct {
	// ClientID and ClientSecret are the App's
	// (ITERION_GITHUB_CLIENT_ID, ITERION_GITHUB_CLIENT_SECRET).
	ClientID, ClientSecret string
	// APIURL is GitHub's REST base ("" means api.github.com).
	APIURL string
	// PublicURL is the server's address as browsers reach it
	// (ITERION_PUBLIC_URL).
	PublicURL string
}

// Service is Slack's part of a server: the intake of events,
// interactions and commands (over HTTP or Socket Mode), the worker acting
// on the stored deliveries, the relay showing runs in channels, and the
// replies written in threads while the server was down. NewService makes
// it before the engine (whose events wake its relay, see OnEvent); Run
// serves it with the engine's doors.
type Service struct {
	opts    ServiceOptions
	db      *store.DB
	id      Identity
	client  *Client
	people  *People
	taker   *taker
	handler *Handler
	relay   *Relay
	worker  *delivery.Worker
	events  *delivery.Intake
	inter   *delivery.Intake
	cmds    *delivery.Intake
	linker  *Linker
	log     *slog.Logger

	mu      sync.Mutex
	answers Answerer
}

// NewService checks the bot token with Slack (auth.test: a token Slack
// refuses, or a Slack that cannot be reached, is an error) and makes the
// parts that run once Run is called, over db.
func NewService(ctx context.Context, db *store.DB, opts ServiceOptions) (*Service, error) {
	switch {
	case opts.BotToken == "":
		return nil, errors.New("Slack needs its bot token: set ITERION_SLACK_BOT_TOKEN to the app's Bot User OAuth Token (xoxb-…)")
	case opts.Transport == TransportSocket && opts.AppToken == "":
		return nil, errors.New("Slack's Socket Mode needs an app-level token: set ITERION_SLACK_APP_TOKEN (xapp-…, scope connections:write), or use slack.transport: http")
	case opts.Transport != TransportSocket && opts.SigningSecret == "":
		return nil, errors.New("Slack over HTTP needs the app's signing secret: set ITERION_SLACK_SIGNING_SECRET (the app's Basic Information page), or use slack.transport: socket")
	}
	log := cmpLog(opts.Log)
	s := &Service{opts: opts, db: db, log: log}
	s.client = NewClient(ClientOptions{Token: opts.BotToken, AppToken: opts.AppToken, APIURL: opts.APIURL, HTTPClient: opts.HTTPClient,
		Pace: opts.Pace, Redactor: opts.Redactor})
	id, err := s.client.AuthTest(ctx)
	if err != nil {
		return nil, err
	}
	s.id = id
	people := PeopleOptions{Users: opts.Users, Allowed: opts.Allowed, Repo: opts.GitHub, Links: storeLinks{db}}
	if si := opts.SignIn; si != nil {
		oauth := ghbot.NewUserAuth(ghbot.UserAuthOptions{ClientID: si.ClientID, ClientSecret: si.ClientSecret, WebURL: opts.GitURL,
			APIURL: si.APIURL, HTTP: opts.HTTPClient})
		s.linker = NewLinker(LinkerOptions{OAuth: oauth, Key: []byte(si.ClientSecret), PublicURL: si.PublicURL, Store: db, Log: log})
		people.LinkURL = s.linker.URL
	}
	s.people = NewPeople(people)
	s.taker = &taker{team: id.TeamID, botUser: id.UserID, slash: cmp.Or(opts.Command, DefaultCommand), store: db, client: s.client, log: log}
	hopts := HandlerOptions{Store: db, Client: s.client, People: s.people, Answers: s.doors,
		Launch: opts.Launch, Workflows: opts.Workflows, Team: id.TeamID, Log: log}
	if s.linker != nil {
		hopts.Confirm = s.linker.Confirm
	}
	s.handler = NewHandler(hopts)
	s.relay = NewRelay(RelayOptions{Store: db, Client: s.client, People: s.people, BotID: id.BotID, Workspace: id.URL, Channel: opts.Channel,
		GitURL: opts.GitURL, StatusEvery: opts.StatusEvery, Failpoint: opts.Failpoint, Log: log})
	s.worker = delivery.NewWorker(db, cmp.Or(opts.Workers, DefaultWorkers), log, s.handler.Handle)
	s.worker.Source = "slack"
	s.worker.GiveUp = s.handler.GiveUp
	s.worker.Failpoint = opts.Failpoint
	in := delivery.IntakeOptions{Store: db, Bodies: opts.Bodies, MaxBody: maxBody, Wake: s.worker.Wake, Log: log}
	sig := signed{secret: opts.SigningSecret}
	s.events = delivery.NewIntake(eventsChannel{signed: sig, t: s.taker}, in)
	s.inter = delivery.NewIntake(interactiveChannel{signed: sig, t: s.taker}, in)
	s.cmds = delivery.NewIntake(commandsChannel{signed: sig, t: s.taker}, in)
	return s, nil
}

// maxBody bounds a Slack request's body: Slack's are a few kilobytes,
// an interaction with a large message's blocks some hundreds.
const maxBody = 1 << 20

// Identity is who the bot token is (auth.test).
func (s *Service) Identity() Identity { return s.id }

// Transport is the transport on: TransportHTTP or TransportSocket.
func (s *Service) Transport() string {
	if s.opts.Transport == TransportSocket {
		return TransportSocket
	}
	return TransportHTTP
}

// Callback is the sign-in's callback (GET CallbackPath), nil without
// SignIn.
func (s *Service) Callback() http.Handler {
	if s.linker == nil {
		return nil
	}
	return s.linker
}

// OwnsState reports whether a sign-in's state is one of Slack's account
// links' (the callback is shared with the admin page's sign-in).
func (s *Service) OwnsState(state string) bool {
	return s.linker != nil && s.linker.Owns(state)
}

// Revoked drops the account links to GitHub account githubID, whose
// authorization of the App was revoked (the GitHub App's hook).
func (s *Service) Revoked(ctx context.Context, githubID int64) error {
	n, err := s.db.DropLinks(ctx, githubID)
	if err == nil && n > 0 {
		s.log.Info("account links dropped: the GitHub authorization was revoked", "github_id", githubID, "links", n)
	}
	return err
}

// Events, Interactive and Commands are the HTTP endpoints (POST
// /webhooks/slack/events, /interactive, /commands): each takes Slack's
// signed requests in, stores what they ask for, then acknowledges them.
func (s *Service) Events() http.Handler      { return s.events }
func (s *Service) Interactive() http.Handler { return s.inter }
func (s *Service) Commands() http.Handler    { return s.cmds }

// Started is closed once Run has taken up the deliveries stored before it
// (acknowledged before a crash); a server takes requests in after it.
func (s *Service) Started() <-chan struct{} { return s.worker.Started() }

// OnEvent is the engine's event hook for Slack: events that come with
// outbox rows wake the relay, and progress is shown at the pace the
// relay allows. It never blocks.
func (s *Service) OnEvent(ev engine.Event) {
	switch ev.Type {
	case engine.EventRunStarted, engine.EventRunFinished, engine.EventRunFailed, engine.EventRunCancelled, engine.EventRunPaused,
		engine.EventInteractionAnswered, engine.EventHumanInputRequested, engine.EventHumanAnswers:
		s.relay.Wake()
	case engine.EventNodeStarted, engine.EventNodeFinished, engine.EventRunResumed:
		s.relay.Touch(ev.RunID)
	}
}

// doors returns the engine's door for answers, bound by Run.
func (s *Service) doors() Answerer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answers
}

// Run acts on the deliveries, relays the runs, reads the replies written
// in runs' threads while the server was down and, in Socket Mode, keeps
// the WebSocket open, until ctx ends; it returns once they have all
// stopped. It is called once.
func (s *Service) Run(ctx context.Context, doors Answerer) {
	s.mu.Lock()
	s.answers = doors
	s.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { s.worker.Run(ctx) })
	wg.Go(func() { s.relay.Run(ctx) })
	wg.Go(func() {
		<-s.worker.Started()
		n, err := s.reconcile(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("reading the replies written in Slack threads while the server was down failed", "err", err)
		case err == nil && n > 0:
			s.log.Info("replies written in Slack threads while the server was down are taken in", "replies", n)
		}
	})
	if s.Transport() == TransportSocket {
		wg.Go(func() { s.socket(ctx) })
	}
	wg.Wait()
}

// String describes the Service for serve's log.
func (s *Service) String() string {
	return fmt.Sprintf("Slack workspace %s (%s) as %s over %s", s.id.Team, s.id.TeamID, s.id.User, s.Transport())
}
