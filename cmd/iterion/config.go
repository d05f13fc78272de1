package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/iterion-bot/iterion/bot/delivery"
	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/bot/page"
	"github.com/iterion-bot/iterion/bot/repoconfig"
	"github.com/iterion-bot/iterion/bot/schedule"
	slackbot "github.com/iterion-bot/iterion/bot/slack"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/internal/textdist"
)

// The defaults of iterion's settings, each declared once: the config's
// defaults, the commands' help and the docs (TestDocsStateTheDefaults)
// read them from here. The GitHub App's are its package's (ghbot.Default…).
const (
	// defaultStoreDir is the store directory, in the current directory.
	defaultStoreDir = ".iterion"
	// defaultAddr is serve's listen address.
	defaultAddr = ":8080"
	// defaultShutdownGrace is how long a stop waits for the requests and
	// runs in flight.
	defaultShutdownGrace = 30 * time.Second
	// defaultRetention is how long a stopped run is kept: 30 days.
	defaultRetention = 30 * 24 * time.Hour
	// defaultWorkspaceQuotaMB is the most a run's workspace may hold under
	// serve, in MiB.
	defaultWorkspaceQuotaMB = 10 << 10
	// defaultLogLevel and defaultLogFormat are serve's log's.
	defaultLogLevel, defaultLogFormat = "info", "text"
	// defaultSandboxDriver runs the processes of runs.
	defaultSandboxDriver = "bwrap"
	// defaultAPITokenName is who answers and launches through
	// $ITERION_API_TOKEN are recorded as.
	defaultAPITokenName = "api"
	// sweepEvery is how often serve looks for runs past the retention and
	// workspaces kept too long.
	sweepEvery = time.Hour
	// defaultWaitTimeout is how long iterion runs wait waits.
	defaultWaitTimeout = 10 * time.Minute
	// readHeaderTimeout bounds the request headers of serve's HTTP server
	// and fake-model's: a client's come in milliseconds, and with a
	// webhook body's 10 s (webhooks.body_timeout) no client trickling a
	// webhook holds its connection past 15 s.
	readHeaderTimeout = 5 * time.Second
	// minWebhookMemoryMB is the least webhooks.memory_mb that reads one
	// body of GitHub's largest (25 MiB), which may not take the last
	// eighth of the pool.
	minWebhookMemoryMB = 29
)

// durationText writes d as the config file and the docs do: 168h, not
// 168h0m0s.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// serveConfig is the configuration of iterion serve: the file named by
// --config (or $ITERION_CONFIG) decoded onto defaultServeConfig, then
// overridden by flags and environment variables (serveSettings). The file
// holds no secrets: the webhook secret, the App's private key and the API
// token come only from the environment, and the parser refuses keys that
// look like them (secretKeys).
type serveConfig struct {
	// Addr is the TCP listen address, host:port.
	Addr string `yaml:"addr"`
	// Store is the store directory; "" means $ITERION_STORE, else .iterion.
	// A relative path in the file is relative to the file's directory.
	Store string `yaml:"store"`
	// ShutdownGrace is how long a stop waits for the requests and runs in
	// flight; runs still going then continue at the next start.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// Retention is how long a stopped run (finished, failed, cancelled,
	// failed resumably) is kept after its last change before the hourly
	// sweep removes it with its events, checkpoints and workspace; 0
	// keeps every run. Paused and running runs are never removed.
	Retention time.Duration `yaml:"retention"`
	// Log is where serve's own log goes: stderr, at a level, in a format.
	Log logSettings `yaml:"log"`
	// GitHub is the App's non-secret settings; see githubSettings for how
	// the environment completes and overrides them.
	GitHub githubFile `yaml:"github"`
	// Sandbox is where the processes of runs run; see sandboxSettings.
	Sandbox sandboxSettings `yaml:"sandbox"`
	// Slack is Slack's non-secret settings; see slackSettings for the
	// environment's part (the tokens, and whether Slack is on).
	Slack slackFile `yaml:"slack"`
	// Webhooks bound what the webhooks' bodies hold while they are read,
	// before their signature can be checked.
	Webhooks webhookSettings `yaml:"webhooks"`
	// Secrets names environment variables whose values are secrets of
	// this server beyond those iterion knows (a Slack token, a database
	// password): like the model keys, the API token, the webhook secret
	// and the App's key, their values are scrubbed from everything that
	// leaves a run. Names, never values: the file holds no secrets.
	Secrets []string `yaml:"secrets"`
	// WorkflowEnv names the environment variables the workflows' property
	// values may read (${NAME:-default}): names, or prefixes ending in
	// '*'. Empty (the default): none, every reference takes its default.
	// Never a secret's, whatever is listed.
	WorkflowEnv []string `yaml:"workflow_env"`
	// API has no settings yet; the key is reserved so that a token written
	// under it is refused as a secret rather than as an unknown key.
	API struct{} `yaml:"api"`
	// Schedules are the server's own schedules: a workflow file of the
	// server started on a cron spec.
	Schedules []serverSchedule `yaml:"schedules"`
	// Page is the admin page's; see pageSettings.
	Page pageFile `yaml:"page"`

	// file is the config file read, "" when none.
	file string
}

// logSettings configure serve's slog logger.
type logSettings struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is text (key=value) or json.
	Format string `yaml:"format"`
}

// githubFile is the GitHub App's part of the config file.
type githubFile struct {
	// AppID is the App's numeric id; 0 means no App.
	AppID int64 `yaml:"app_id"`
	// APIURL is the REST base; "" means github.com.
	APIURL string `yaml:"api_url"`
	// GitURL is where repositories are cloned from.
	GitURL string `yaml:"git_url"`
	// Workers is how many webhook deliveries are handled at once.
	Workers int `yaml:"workers"`
	// PrivateKeyFile is the path of the App's .pem file, relative to the
	// config file's directory; $ITERION_GITHUB_PRIVATE_KEY overrides it.
	PrivateKeyFile string `yaml:"private_key_file"`
	// KeepWorkspaces is how long the checkout of a run that stopped but
	// could still be resumed (cancelled, failed resumably) is kept.
	KeepWorkspaces time.Duration `yaml:"keep_workspaces"`
	// ClientID is the App's OAuth client id, for the admin page's sign-in
	// with GitHub; $ITERION_GITHUB_CLIENT_ID overrides it. Its secret
	// comes only from $ITERION_GITHUB_CLIENT_SECRET.
	ClientID string `yaml:"client_id"`
}

// pageFile is the admin page's part of the config file.
type pageFile struct {
	// PublicURL is the page's address as people reach it;
	// $ITERION_PUBLIC_URL overrides it.
	PublicURL string `yaml:"public_url"`
	// AllowedOrgs and AllowedTeams ("org/team-slug") are who may sign in
	// with GitHub: members of one of them. Both empty: any GitHub user.
	AllowedOrgs  []string `yaml:"allowed_orgs"`
	AllowedTeams []string `yaml:"allowed_teams"`
	// SessionTTL is how long a sign-in lasts.
	SessionTTL time.Duration `yaml:"session_ttl"`
}

// serverSchedule is one of the server's schedules (see docs/schedules.md).
type serverSchedule struct {
	// Name names it: letters, digits, - and _; it is listed as
	// server/<name>.
	Name string `yaml:"name"`
	// Cron is five fields or a descriptor (@daily, @every 6h), in
	// Timezone (an IANA name; "" means UTC).
	Cron     string `yaml:"cron"`
	Timezone string `yaml:"timezone"`
	// Workflow is the .bot file, relative to the config file's
	// directory; Vars are its vars.
	Workflow string            `yaml:"workflow"`
	Vars     map[string]string `yaml:"vars"`
	// Overlap is skip (the default) or queue; Grace is how late a tick
	// may fire after downtime (default schedule.DefaultGrace).
	Overlap string        `yaml:"overlap"`
	Grace   time.Duration `yaml:"grace"`
	// Report names where the runs are shown besides the server's log.
	Report serverReport `yaml:"report"`
}

// serverReport is where a server schedule's runs are shown.
type serverReport struct {
	// Slack is a channel for a card per run.
	Slack string `yaml:"slack"`
}

// webhookSettings bound the bodies of the webhooks being read, across
// every channel (delivery.Bodies).
type webhookSettings struct {
	// MemoryMB is the most the bodies being read hold at once, in MiB.
	MemoryMB int64 `yaml:"memory_mb"`
	// Bodies is how many bodies are read at once.
	Bodies int `yaml:"bodies"`
	// BodyTimeout is how long a body may take to arrive.
	BodyTimeout time.Duration `yaml:"body_timeout"`
}

// defaultServeConfig is the configuration without a file.
func defaultServeConfig() serveConfig {
	return serveConfig{
		Addr:          defaultAddr,
		ShutdownGrace: defaultShutdownGrace,
		Retention:     defaultRetention,
		Log:           logSettings{Level: defaultLogLevel, Format: defaultLogFormat},
		GitHub:        githubFile{GitURL: ghbot.DefaultGitURL, Workers: ghbot.DefaultWorkers, KeepWorkspaces: ghbot.DefaultKeepWorkspaces},
		Sandbox:       sandboxSettings{WorkspaceQuotaMB: defaultWorkspaceQuotaMB},
		Webhooks:      webhookSettings{MemoryMB: delivery.DefaultBodyBytes >> 20, Bodies: delivery.DefaultBodies, BodyTimeout: delivery.DefaultBodyTimeout},
		Slack:         slackFile{Transport: slackbot.TransportHTTP, Workers: slackbot.DefaultWorkers},
		Page:          pageFile{SessionTTL: page.DefaultSessionTTL},
	}
}

// serveFlags are serve's command-line settings; "" means not given.
type serveFlags struct {
	config, addr, store string
	check               bool
}

// serveSettings reads the config file and applies, for each setting, the
// flag, else the environment variable, else the file, else the default.
// The GitHub App's environment variables are applied by githubSettings.
// Paths are as written, relative to the App's directory.
func (a *App) serveSettings(f serveFlags) (serveConfig, error) {
	path, via := f.config, "--config"
	if path == "" {
		path, via = a.getenv("ITERION_CONFIG"), "$ITERION_CONFIG"
	}
	cfg, err := a.loadServeConfig(path, via)
	if err != nil {
		return cfg, err
	}
	cfg.Addr = cmp.Or(f.addr, a.getenv("ITERION_ADDR"), cfg.Addr)
	cfg.Store = cmp.Or(f.store, a.getenv("ITERION_STORE"), cfg.Store, defaultStoreDir)
	return cfg, nil
}

// loadServeConfig reads the config file at path, which came from via (a
// flag or a variable, for messages); "" gives the defaults.
func (a *App) loadServeConfig(path, via string) (serveConfig, error) {
	cfg := defaultServeConfig()
	if path == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(a.path(path))
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, fmt.Errorf("config file %s (%s) does not exist: check the path, which is relative to the current directory", path, via)
	}
	if err != nil {
		return cfg, fmt.Errorf("reading config file %s (%s): %w", path, via, err)
	}
	if err := parseServeConfig(path, data, &cfg); err != nil {
		return cfg, err
	}
	cfg.file = path
	dir := filepath.Dir(path)
	paths := []*string{&cfg.Store, &cfg.GitHub.PrivateKeyFile}
	for i := range cfg.Schedules {
		paths = append(paths, &cfg.Schedules[i].Workflow)
	}
	for _, p := range paths {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	for name, p := range cfg.Slack.Workflows {
		if !filepath.IsAbs(p) {
			cfg.Slack.Workflows[name] = filepath.Join(dir, p)
		}
	}
	return cfg, nil
}

// configError is a mistake in the config file, at a 1-based line and
// column (0 when YAML does not tell).
type configError struct {
	File         string
	Line, Column int
	Message      string
}

func (e configError) Error() string {
	if e.Column == 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Message)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Message)
}

// configErrors is every mistake found, in the file's order.
type configErrors []configError

func (es configErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// secretKeys are keys someone may write in the file for a secret, by name
// anywhere or by dotted path, with the environment variable to use
// instead. Their values are never repeated in a message.
var secretKeys = map[string]string{
	"webhook_secret": "ITERION_GITHUB_WEBHOOK_SECRET",
	"github.secret":  "ITERION_GITHUB_WEBHOOK_SECRET",
	"private_key":    "ITERION_GITHUB_PRIVATE_KEY",
	"api_token":      "ITERION_API_TOKEN",
	"api.token":      "ITERION_API_TOKEN",
	"bot_token":      "ITERION_SLACK_BOT_TOKEN",
	"slack.token":    "ITERION_SLACK_BOT_TOKEN",
	"signing_secret": "ITERION_SLACK_SIGNING_SECRET",
	"app_token":      "ITERION_SLACK_APP_TOKEN",
	"admin_token":    "ITERION_ADMIN_TOKEN",
	"page.token":     "ITERION_ADMIN_TOKEN",
	"client_secret":  "ITERION_GITHUB_CLIENT_SECRET",
}

// ghName is the shape of a GitHub login or team slug.
var ghName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// envName is the shape of an environment variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// logLevels are the values of log.level.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// configChecks check the values of keys, by dotted path, once decoded.
// Each returns what to write instead, or "". at is `key "value"`.
var configChecks = map[string]func(at string, v reflect.Value) string{
	"addr": func(at string, v reflect.Value) string {
		if _, _, err := net.SplitHostPort(v.String()); err != nil {
			return at + ": write host:port, like :8080 or 127.0.0.1:8080"
		}
		return ""
	},
	"shutdown_grace": func(at string, v reflect.Value) string {
		if v.Int() < 0 {
			return at + ": write 0s to stop without waiting, or a positive duration like 30s"
		}
		return ""
	},
	"retention": func(at string, v reflect.Value) string {
		if d := time.Duration(v.Int()); d != 0 && d < time.Hour {
			return at + ": write 0s to keep every run, or at least 1h, like 720h for 30 days"
		}
		return ""
	},
	"log.level": func(at string, v reflect.Value) string {
		if _, ok := logLevels[v.String()]; !ok {
			return at + ": use debug, info, warn or error"
		}
		return ""
	},
	"log.format": func(at string, v reflect.Value) string {
		if s := v.String(); s != "text" && s != "json" {
			return at + ": use text or json"
		}
		return ""
	},
	"sandbox.driver": func(at string, v reflect.Value) string {
		if !sandboxDrivers[v.String()] {
			return at + ": use bwrap (the default), docker (with sandbox.docker_image) or host (no isolation)"
		}
		return ""
	},
	"sandbox.workspace_quota_mb": func(at string, v reflect.Value) string {
		if v.Int() < 0 {
			return at + ": write 0 for no quota, or a size in MiB like 10240"
		}
		return ""
	},
	"sandbox.limits.memory_mb": func(at string, v reflect.Value) string {
		if v.Int() < 0 {
			return at + fmt.Sprintf(": write 0 for the default (%d), or a size in MiB", nodesandbox.DefaultLimits().Memory>>20)
		}
		return ""
	},
	"sandbox.docker_images": func(at string, v reflect.Value) string {
		if img := v.String(); img == "" || strings.HasPrefix(img, "-") || strings.ContainsAny(img, " \t\n") {
			return at + ": write an image reference, like golang:1.26 or ghcr.io/acme/ci@sha256:…"
		}
		return ""
	},
	"sandbox.network": func(at string, v reflect.Value) string {
		if s := v.String(); s != "none" && s != "open" && s != "model-only" {
			return at + ": use none (the default: no network at all; agent CLIs reach their model only, through the run's proxy), model-only (the same) or open (the server's network, loopback included)"
		}
		return ""
	},
	"sandbox.mounts": func(at string, v reflect.Value) string {
		if _, err := parseMount(v.String()); err != nil {
			return at + ": " + err.Error()
		}
		return ""
	},
	"sandbox.max_parallel_branches": func(at string, v reflect.Value) string {
		if v.Int() < 0 {
			return at + ": write 0 for four per core, or a positive number"
		}
		return ""
	},
	"secrets": func(at string, v reflect.Value) string {
		// The message must not repeat the value: it may be a secret.
		if !envName.MatchString(v.String()) {
			return at + ": write the name of an environment variable that holds a secret (like SLACK_BOT_TOKEN), never the secret itself"
		}
		return ""
	},
	"github.app_id": func(at string, v reflect.Value) string {
		if v.Int() <= 0 {
			return at + `: write the App's numeric id (the App's settings page, "App ID")`
		}
		return ""
	},
	"github.api_url": func(at string, v reflect.Value) string {
		return checkURL(at, v.String(), "https://ghe.example.com/api/v3/")
	},
	"github.git_url": func(at string, v reflect.Value) string {
		return checkURL(at, v.String(), "https://ghe.example.com")
	},
	"github.workers": func(at string, v reflect.Value) string {
		if v.Int() < 1 {
			return at + ": write at least 1"
		}
		return ""
	},
	"github.keep_workspaces": func(at string, v reflect.Value) string {
		if time.Duration(v.Int()) < time.Hour {
			return at + ": write at least 1h, like 168h for a week"
		}
		return ""
	},
	"webhooks.memory_mb": func(at string, v reflect.Value) string {
		if v.Int() < 1 {
			return at + fmt.Sprintf(": write a size in MiB, at least 1, like %d (below %d, GitHub's largest payloads are refused with 503)", delivery.DefaultBodyBytes>>20, minWebhookMemoryMB)
		}
		return ""
	},
	"webhooks.bodies": func(at string, v reflect.Value) string {
		if v.Int() < 1 {
			return at + fmt.Sprintf(": write at least 1, like %d", delivery.DefaultBodies)
		}
		return ""
	},
	"webhooks.body_timeout": func(at string, v reflect.Value) string {
		if time.Duration(v.Int()) < time.Second {
			return at + ": write at least 1s, like " + durationText(delivery.DefaultBodyTimeout)
		}
		return ""
	},
	"slack.transport": func(at string, v reflect.Value) string {
		if s := v.String(); s != slackbot.TransportHTTP && s != slackbot.TransportSocket {
			return at + ": use http (the Events API on a public URL, the default) or socket (Socket Mode, behind a firewall)"
		}
		return ""
	},
	"slack.channel": func(at string, v reflect.Value) string {
		if !slackChannel.MatchString(v.String()) {
			return at + ": write a channel's name, like \"#iterion\", or its id, like C0123ABCD"
		}
		return ""
	},
	"slack.users": func(at string, v reflect.Value) string {
		if !ghbot.ValidLogin(v.String()) {
			return at + ": write the person's GitHub login, like octocat"
		}
		return ""
	},
	"slack.allowed": func(at string, v reflect.Value) string {
		if !ghbot.ValidLogin(v.String()) {
			return at + ": write a GitHub login, like octocat"
		}
		return ""
	},
	"slack.workflows": func(at string, v reflect.Value) string {
		if p := v.String(); filepath.Ext(p) != ".bot" && filepath.Ext(p) != ".iter" {
			return at + ": write the path of a .bot file, relative to this file's directory"
		}
		return ""
	},
	"schedules.name": func(at string, v reflect.Value) string {
		if !scheduleName.MatchString(v.String()) {
			return at + ": use letters, digits, - and _ (at most 64)"
		}
		return ""
	},
	"schedules.cron": func(at string, v reflect.Value) string {
		if _, err := schedule.Parse(v.String(), ""); err != nil {
			return at + ": " + err.Error()
		}
		return ""
	},
	"schedules.timezone": func(at string, v reflect.Value) string {
		if _, err := schedule.Parse("@daily", v.String()); err != nil {
			return at + ": " + err.Error()
		}
		return ""
	},
	"schedules.workflow": func(at string, v reflect.Value) string {
		if ext := filepath.Ext(v.String()); ext != ".bot" && ext != ".iter" {
			return at + ": write the path of a .bot file, relative to this file's directory"
		}
		return ""
	},
	"slack.workers": func(at string, v reflect.Value) string {
		if v.Int() < 1 {
			return at + ": write at least 1"
		}
		return ""
	},
	"schedules.overlap": func(at string, v reflect.Value) string {
		if s := v.String(); s != schedule.OverlapSkip && s != schedule.OverlapQueue {
			return at + ": use skip (the default: a tick while the last run goes on is skipped) or queue (it waits for that run)"
		}
		return ""
	},
	"schedules.grace": func(at string, v reflect.Value) string {
		if d := time.Duration(v.Int()); d < time.Minute || d > repoconfig.MaxGrace {
			return at + fmt.Sprintf(": write a duration from 1m to %s, like %s", durationText(repoconfig.MaxGrace), durationText(schedule.DefaultGrace))
		}
		return ""
	},
	"page.public_url": func(at string, v reflect.Value) string {
		return checkURL(at, v.String(), "https://iterion.example.com")
	},
	"page.allowed_orgs": func(at string, v reflect.Value) string {
		if !ghName.MatchString(v.String()) {
			return at + ": write an organization's login, like acme"
		}
		return ""
	},
	"page.allowed_teams": func(at string, v reflect.Value) string {
		org, team, ok := strings.Cut(v.String(), "/")
		if !ok || !ghName.MatchString(org) || !ghName.MatchString(team) {
			return at + ": write org/team-slug, like acme/maintainers"
		}
		return ""
	},
	"page.session_ttl": func(at string, v reflect.Value) string {
		if d := time.Duration(v.Int()); d < time.Minute || d > 30*24*time.Hour {
			return at + ": write a duration from 1m to 720h, like 12h"
		}
		return ""
	},
	"github.private_key_file": func(_ string, v reflect.Value) string {
		// The message must not repeat the key.
		if strings.HasPrefix(strings.TrimSpace(v.String()), "-----BEGIN") {
			return "github.private_key_file holds the key itself, a secret, not the path of its file: " +
				"remove it and set ITERION_GITHUB_PRIVATE_KEY in the environment, or write the file's path"
		}
		return ""
	},
}

// scheduleName is the shape of a schedule's name.
var scheduleName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// recordChecks check lists of mappings as a whole, by dotted path.
var recordChecks = map[string]func(p *configParser, items []*yaml.Node){
	"schedules": func(p *configParser, items []*yaml.Node) {
		seen := map[string]int{}
		for i, item := range items {
			r := resolve(item)
			if r == nil || r.Kind != yaml.MappingNode {
				continue
			}
			var name, cron, zone *yaml.Node
			has := map[string]bool{}
			for j := 0; j+1 < len(r.Content); j += 2 {
				k, v := r.Content[j].Value, resolve(r.Content[j+1])
				has[k] = v != nil
				switch k {
				case "name":
					name = v
				case "cron":
					cron = v
				case "timezone":
					zone = v
				}
			}
			for _, req := range []string{"name", "cron", "workflow"} {
				if !has[req] {
					p.addf(item, "schedules[%d] needs %s (every schedule has a name, a cron spec and a workflow file)", i, req)
				}
			}
			if name != nil {
				if at, dup := seen[name.Value]; dup {
					p.addf(name, "schedules[%d]: schedule %q is declared twice (also at line %d): give each its own name", i, name.Value, at)
				}
				seen[name.Value] = name.Line
			}
			if cron != nil && zone != nil && cron.Kind == yaml.ScalarNode && zone.Kind == yaml.ScalarNode {
				if _, err := schedule.Parse(cron.Value, zone.Value); err != nil && strings.Contains(err.Error(), "keep one") {
					p.addf(cron, "schedules[%d].cron %q: %v", i, cron.Value, err)
				}
			}
		}
	},
}

func checkURL(at, s, example string) string {
	if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return at + ": write an http or https URL, like " + example
	}
	return ""
}

// parseServeConfig decodes data, the contents of file, onto cfg. Every
// mistake is reported at its line with what to write instead, as
// configErrors; cfg is then left partly decoded. An empty file changes
// nothing.
func parseServeConfig(file string, data []byte, cfg *serveConfig) error {
	p := &configParser{file: file, keys: map[string]*yaml.Node{}}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return configErrors{p.syntaxError(err)}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return configErrors{p.syntaxError(err)}
	default:
		p.errs = append(p.errs, configError{File: file, Line: max(next.Line, 1), Message: "a second YAML document starts here: keep the whole configuration in one"})
	}
	if len(doc.Content) > 0 {
		p.walk(doc.Content[0], reflect.TypeFor[serveConfig](), "")
	}
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b configError) int {
			return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
		})
		return p.errs
	}
	// The walk accepted every key and value, so this decode, the one that
	// fills cfg, is not expected to fail (FuzzServeConfig checks); its
	// error, which carries its own line, is passed on all the same.
	dec = yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// configKeyChecks check the keys of mappings, by dotted path. Each
// returns what to write instead, or "". at is `path key "key"`.
var configKeyChecks = map[string]func(at, key string) string{
	"slack.users": func(at, key string) string {
		if !slackUserID.MatchString(key) {
			return at + ": write a Slack user's id, like U0123ABCD (their profile, \"Copy member ID\")"
		}
		return ""
	},
	"slack.workflows": func(at, key string) string {
		if !workflowName.MatchString(key) {
			return at + ": a workflow's name is letters, digits, - and _"
		}
		return ""
	},
}

// configParser checks the YAML tree of a config file against serveConfig
// before it is decoded, to report mistakes by key, at their positions,
// with suggestions.
type configParser struct {
	file string
	errs configErrors
	// keys holds the key node of each key set, by dotted path.
	keys map[string]*yaml.Node
}

func (p *configParser) addf(n *yaml.Node, format string, args ...any) {
	p.errs = append(p.errs, configError{File: p.file, Line: max(n.Line, 1), Column: max(n.Column, 1), Message: fmt.Sprintf(format, args...)})
}

// syntaxError positions a YAML error ("yaml: line 3: …"); the library
// leaves the line out on the first line.
func (p *configParser) syntaxError(err error) configError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if _, scanErr := fmt.Sscanf(msg, "line %d:", &line); scanErr == nil {
		msg = strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
	}
	return configError{File: p.file, Line: max(line, 1), Message: "not valid YAML: " + msg + "; check the indentation and quoting on this line and the one before"}
}

// walk checks that n, the value at path, is a mapping of the keys of the
// struct type t (their yaml tags), and checks their values.
func (p *configParser) walk(n *yaml.Node, t reflect.Type, path string) {
	r := resolve(n)
	if r == nil {
		return // no value: the defaults stay
	}
	keys := yamlKeys(t)
	if r.Kind != yaml.MappingNode {
		what := "the file"
		if path != "" {
			what = path
		}
		if len(keys) == 0 {
			p.addf(n, "%s must be a mapping, not %s", what, describe(r))
		} else {
			p.addf(n, "%s must be a mapping with the keys %s, not %s", what, strings.Join(keys, ", "), describe(r))
		}
		return
	}
	for i := 0; i+1 < len(r.Content); i += 2 {
		k, v := r.Content[i], r.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.addf(k, "a key must be a plain word, not %s", describe(k))
			continue
		}
		full := joinKey(path, k.Value)
		if k.Value == "<<" {
			p.addf(k, "merge keys (<<) are not supported in this file: write the keys out")
			continue
		}
		if env, ok := secretEnv(path, k.Value); ok {
			fix := "remove it and set " + env + " in the environment instead"
			if env == "ITERION_GITHUB_PRIVATE_KEY" {
				fix = "remove it and set ITERION_GITHUB_PRIVATE_KEY in the environment instead (PEM text or a file path), or write the file's path as github.private_key_file"
			}
			p.addf(k, "%s is a secret, and iterion serve reads secrets only from the environment: %s", full, fix)
			continue
		}
		f, ok := fieldByKey(t, k.Value)
		if !ok {
			p.addf(k, "%s", unknownKey(t, path, k.Value))
			continue
		}
		if prev := p.keys[full]; prev != nil {
			p.addf(k, "%s is set twice (also at line %d): keep one", full, prev.Line)
			continue
		}
		p.keys[full] = k
		switch {
		case f.Type.Kind() == reflect.Struct:
			p.walk(v, f.Type, full)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			p.records(v, f.Type.Elem(), full)
		case f.Type.Kind() == reflect.Slice:
			p.list(v, f.Type, full)
		case f.Type.Kind() == reflect.Map:
			p.dict(v, f.Type, full)
		default:
			p.leaf(v, f.Type, full)
		}
	}
}

// records checks the value n of the key at path, a list of mappings of
// the struct type t, each item as walk does (its keys' checks are those
// of path.key), then the list as a whole with recordChecks[path].
func (p *configParser) records(n *yaml.Node, t reflect.Type, path string) {
	r := resolve(n)
	if r == nil {
		return
	}
	if r.Kind != yaml.SequenceNode {
		p.addf(n, "%s: write a list of mappings with the keys %s, not %s", path, strings.Join(yamlKeys(t), ", "), describe(r))
		return
	}
	for i, item := range r.Content {
		p.walk(item, t, fmt.Sprintf("%s[%d]", path, i))
	}
	if check := recordChecks[path]; check != nil {
		check(p, r.Content)
	}
}

// dict checks the value n of the key at path, a mapping of type t:
// each key with the key check of path, each value with its check.
func (p *configParser) dict(n *yaml.Node, t reflect.Type, path string) {
	r := resolve(n)
	if r == nil {
		return
	}
	if r.Kind != yaml.MappingNode {
		p.addf(n, "%s: write a mapping of names to values, like {branch: main}, not %s", path, describe(r))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(r.Content); i += 2 {
		k, v := r.Content[i], r.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.addf(k, "%s: a key must be a plain word, not %s", path, describe(k))
			continue
		}
		if line, ok := seen[k.Value]; ok {
			p.addf(k, "%s %q is set twice (also at line %d): keep one", path, k.Value, line)
			continue
		}
		seen[k.Value] = k.Line
		if check := configKeyChecks[checkPath(path)]; check != nil {
			if msg := check(fmt.Sprintf("%s key %q", path, k.Value), k.Value); msg != "" {
				p.addf(k, "%s", msg)
				continue
			}
		}
		rv := resolve(v)
		if rv == nil || rv.Kind != yaml.ScalarNode {
			p.addf(v, "%s.%s: write %s, not %s", path, k.Value, valueKind(t.Elem()), describeOrNull(rv))
			continue
		}
		val := reflect.New(t.Elem())
		if err := rv.Decode(val.Interface()); err != nil {
			p.addf(v, "%s.%s: write %s", path, k.Value, valueKind(t.Elem()))
			continue
		}
		if check := configChecks[checkPath(path)]; check != nil {
			if msg := check(fmt.Sprintf("%s.%s %q", path, k.Value, rv.Value), val.Elem()); msg != "" {
				p.addf(v, "%s", msg)
			}
		}
	}
}

// checkPath is the key of configChecks for path: without list indexes.
func checkPath(path string) string {
	for {
		i := strings.IndexByte(path, '[')
		j := strings.IndexByte(path, ']')
		if i < 0 || j < i {
			return path
		}
		path = path[:i] + path[j+1:]
	}
}

// leaf checks the value n of the key at path, of type t.
func (p *configParser) leaf(n *yaml.Node, t reflect.Type, path string) {
	r := resolve(n)
	if r == nil {
		return
	}
	if r.Kind != yaml.ScalarNode {
		p.addf(n, "%s: write %s, not %s", path, valueKind(t), describe(r))
		return
	}
	v := reflect.New(t)
	if err := r.Decode(v.Interface()); err != nil {
		p.addf(n, "%s %q: write %s", path, r.Value, valueKind(t))
		return
	}
	if check := configChecks[checkPath(path)]; check != nil {
		if msg := check(fmt.Sprintf("%s %q", path, r.Value), v.Elem()); msg != "" {
			p.addf(n, "%s", msg)
		}
	}
}

// list checks the value n of the key at path, a list of type t, item by
// item with the check of path. Items are named by their index, not their
// value (a secrets: item may be a value written by mistake).
func (p *configParser) list(n *yaml.Node, t reflect.Type, path string) {
	r := resolve(n)
	if r == nil {
		return
	}
	if r.Kind != yaml.SequenceNode {
		p.addf(n, "%s: write a list, like [A, B], not %s", path, describe(r))
		return
	}
	for i, item := range r.Content {
		at := fmt.Sprintf("%s[%d]", path, i)
		ri := resolve(item)
		if ri == nil || ri.Kind != yaml.ScalarNode {
			p.addf(item, "%s: write %s, not %s", at, valueKind(t.Elem()), describeOrNull(ri))
			continue
		}
		v := reflect.New(t.Elem())
		if err := ri.Decode(v.Interface()); err != nil {
			p.addf(item, "%s: write %s", at, valueKind(t.Elem()))
			continue
		}
		if check := configChecks[checkPath(path)]; check != nil {
			if msg := check(at, v.Elem()); msg != "" {
				p.addf(item, "%s", msg)
			}
		}
	}
}

func describeOrNull(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	return describe(n)
}

// resolve follows an alias; nil means no value (null or empty).
func resolve(n *yaml.Node) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	return n
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "a single value"
	}
}

func valueKind(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "a duration, a number and a unit like 30s, 2m or 1m30s"
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		return "a whole number"
	default:
		return "a single value"
	}
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func secretEnv(path, key string) (string, bool) {
	key = strings.ToLower(key)
	if env, ok := secretKeys[key]; ok {
		return env, true
	}
	env, ok := secretKeys[joinKey(path, key)]
	return env, ok
}

// yamlKeys are the keys of a struct type: its fields' yaml tags.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); f.IsExported() && name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); f.IsExported() && name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// unknownKey says what is wrong with key, unknown in the struct type t at
// path: a near key here, else the same or a near key elsewhere, else the
// keys allowed here.
func unknownKey(t reflect.Type, path, key string) string {
	where, known := "", "the keys here are "
	if path != "" {
		where, known = " in "+path, "the keys in "+path+" are "
	}
	keys := yamlKeys(t)
	if near := nearestKey(key, keys); near != "" {
		return fmt.Sprintf("unknown key %q%s: did you mean %q? (%s%s)", key, where, near, known, strings.Join(keys, ", "))
	}
	var elsewhere []string // dotted paths outside this section, by their last key
	var leaves []string
	for _, full := range schemaKeys(reflect.TypeFor[serveConfig](), "") {
		parent, leaf := "", full
		if i := strings.LastIndex(full, "."); i >= 0 {
			parent, leaf = full[:i], full[i+1:]
		}
		if parent != path {
			elsewhere, leaves = append(elsewhere, full), append(leaves, leaf)
		}
	}
	if near := nearestKey(key, leaves); near != "" {
		other := elsewhere[slices.Index(leaves, near)]
		if parent, _, ok := strings.Cut(other, "."); ok {
			return fmt.Sprintf("unknown key %q%s: did you mean %s? It goes in the %s section", key, where, other, parent)
		}
		return fmt.Sprintf("unknown key %q%s: did you mean %s? It goes at the top level of the file", key, where, other)
	}
	if len(keys) == 0 {
		return fmt.Sprintf("unknown key %q%s: %s has no settings yet", key, where, path)
	}
	return fmt.Sprintf("unknown key %q%s (%s%s)", key, where, known, strings.Join(keys, ", "))
}

// schemaKeys lists the dotted path of every key of t, sections first.
func schemaKeys(t reflect.Type, path string) []string {
	var out []string
	for _, k := range yamlKeys(t) {
		f, _ := fieldByKey(t, k)
		out = append(out, joinKey(path, k))
		if f.Type.Kind() == reflect.Struct {
			out = append(out, schemaKeys(f.Type, joinKey(path, k))...)
		}
	}
	return out
}

// nearestKey returns the candidate a typo of key probably meant, or "":
// at most a third of the word edited, and always one edit allowed (keys
// are short: two edits of "foo" make "log").
func nearestKey(key string, candidates []string) string {
	key = strings.ToLower(strings.ReplaceAll(key, "-", "_"))
	best, bestD := "", max(1, len(key)/3)+1
	for _, c := range candidates {
		if d := textdist.Distance(key, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// newServeLogger returns serve's logger on w with the settings, which the
// config file has checked.
func newServeLogger(w io.Writer, s logSettings) *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevels[s.Level]}
	if s.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
