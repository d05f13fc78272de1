package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestServeConfigErrors(t *testing.T) {
	t.Parallel()
	const keys = "(the keys here are addr, store, shutdown_grace, retention, log, github, sandbox, slack, webhooks, secrets, workflow_env, api, schedules, page)"
	const yamlFix = "; check the indentation and quoting on this line and the one before"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"syntax error", "addr: :9000\nlog: level: debug\n",
			"serve.yml:2: not valid YAML: mapping values are not allowed in this context" + yamlFix},
		{"syntax error, bad indentation", "log:\n  level: debug\n format: json\n",
			"serve.yml:2: not valid YAML: did not find expected key" + yamlFix},
		{"unknown key, typo", "adr: :9000\n",
			`serve.yml:1:1: unknown key "adr": did you mean "addr"? ` + keys},
		{"unknown key, swapped letters in a section", "log:\n  levle: debug\n",
			`serve.yml:2:3: unknown key "levle" in log: did you mean "level"? (the keys in log are level, format)`},
		{"unknown key, hyphen for underscore", "github:\n  app-id: 12\n",
			`serve.yml:2:3: unknown key "app-id" in github: did you mean "app_id"? (the keys in github are app_id, api_url, git_url, workers, private_key_file, keep_workspaces, client_id)`},
		{"unknown key of another section", "workers: 8\n",
			`serve.yml:1:1: unknown key "workers": did you mean github.workers? It goes in the github section`},
		{"unknown key of the top level in a section", "github:\n  addr: :1\n",
			`serve.yml:2:3: unknown key "addr" in github: did you mean addr? It goes at the top level of the file`},
		{"unknown key, nothing near", "colour: red\n",
			`serve.yml:1:1: unknown key "colour" ` + keys},
		{"unknown key in api", "api:\n  foo: 1\n",
			`serve.yml:2:3: unknown key "foo" in api: api has no settings yet`},
		{"duration without a unit", "shutdown_grace: 30\n",
			`serve.yml:1:17: shutdown_grace "30": write a duration, a number and a unit like 30s, 2m or 1m30s`},
		{"duration in words", "shutdown_grace: 30 seconds\n",
			`serve.yml:1:17: shutdown_grace "30 seconds": write a duration, a number and a unit like 30s, 2m or 1m30s`},
		{"retention too short", "retention: 5m\n",
			`serve.yml:1:12: retention "5m": write 0s to keep every run, or at least 1h, like 720h for 30 days`},
		{"negative duration", "shutdown_grace: -5s\n",
			`serve.yml:1:17: shutdown_grace "-5s": write 0s to stop without waiting, or a positive duration like 30s`},
		{"duration as a list", "shutdown_grace: [30s]\n",
			`serve.yml:1:17: shutdown_grace: write a duration, a number and a unit like 30s, 2m or 1m30s, not a list`},
		{"bad log level", "log:\n  level: verbose\n",
			`serve.yml:2:10: log.level "verbose": use debug, info, warn or error`},
		{"log level in capitals", "log:\n  level: DEBUG\n",
			`serve.yml:2:10: log.level "DEBUG": use debug, info, warn or error`},
		{"bad log format", "log: {format: yaml}\n",
			`serve.yml:1:15: log.format "yaml": use text or json`},
		{"log not a mapping", "log: debug\n",
			"serve.yml:1:6: log must be a mapping with the keys level, format, not a single value"},
		{"api not a mapping, value not repeated", "api: s3cr3t\n",
			"serve.yml:1:6: api must be a mapping, not a single value"},
		{"secrets not a list", "secrets: SLACK_TOKEN\n",
			"serve.yml:1:10: secrets: write a list, like [A, B], not a single value"},
		{"a secret's value instead of its name, value not repeated", "secrets: [SLACK_TOKEN, xoxb-123-s3cr3t]\n",
			"serve.yml:1:24: secrets[1]: write the name of an environment variable that holds a secret (like SLACK_BOT_TOKEN), never the secret itself"},
		{"a secret that is not a name", "secrets:\n  - {name: X}\n  -\n",
			"serve.yml:2:5: secrets[0]: write a single value, not a mapping\nserve.yml:3:4: secrets[1]: write a single value, not nothing"},
		{"file not a mapping", "- addr: :1\n",
			"serve.yml:1:1: the file must be a mapping with the keys addr, store, shutdown_grace, retention, log, github, sandbox, slack, webhooks, secrets, workflow_env, api, schedules, page, not a list"},
		{"keep_workspaces too short", "github:\n  keep_workspaces: 5m\n",
			`serve.yml:2:20: github.keep_workspaces "5m": write at least 1h, like 168h for a week`},
		{"workers not a number", "github:\n  workers: many\n",
			`serve.yml:2:12: github.workers "many": write a whole number`},
		{"no workers", "github:\n  workers: 0\n",
			`serve.yml:2:12: github.workers "0": write at least 1`},
		{"webhook memory none", "webhooks:\n  memory_mb: 0\n",
			`serve.yml:2:14: webhooks.memory_mb "0": write a size in MiB, at least 1, like 32 (below 29, GitHub's largest payloads are refused with 503)`},
		{"no webhook bodies", "webhooks:\n  bodies: -1\n",
			`serve.yml:2:11: webhooks.bodies "-1": write at least 1, like 1024`},
		{"webhook body timeout too short", "webhooks:\n  body_timeout: 10ms\n",
			`serve.yml:2:17: webhooks.body_timeout "10ms": write at least 1s, like 10s`},
		{"app id not a number", "github:\n  app_id: my-app\n",
			`serve.yml:2:11: github.app_id "my-app": write a whole number`},
		{"app id zero", "github:\n  app_id: 0\n",
			`serve.yml:2:11: github.app_id "0": write the App's numeric id (the App's settings page, "App ID")`},
		{"api url not http", "github:\n  api_url: ghe.example.com/api/v3\n",
			`serve.yml:2:12: github.api_url "ghe.example.com/api/v3": write an http or https URL, like https://ghe.example.com/api/v3/`},
		{"git url not http", "github:\n  git_url: git@ghe.example.com\n",
			`serve.yml:2:12: github.git_url "git@ghe.example.com": write an http or https URL, like https://ghe.example.com`},
		{"addr without a port", "addr: 8080\n",
			`serve.yml:1:7: addr "8080": write host:port, like :8080 or 127.0.0.1:8080`},
		{"key set twice", "addr: :1\nstore: s\naddr: :2\n",
			"serve.yml:3:1: addr is set twice (also at line 1): keep one"},
		{"merge key", "log:\n  <<: {level: debug}\n",
			"serve.yml:2:3: merge keys (<<) are not supported in this file: write the keys out"},
		{"key that is not a word", "[addr]: :1\n",
			"serve.yml:1:1: a key must be a plain word, not a list"},
		{"two documents", "addr: :1\n---\nstore: s\n",
			"serve.yml:2: a second YAML document starts here: keep the whole configuration in one"},
		{"slack transport unknown", "slack:\n  transport: websocket\n",
			`serve.yml:2:14: slack.transport "websocket": use http (the Events API on a public URL, the default) or socket (Socket Mode, behind a firewall)`},
		{"slack channel with a space", "slack:\n  channel: \"#release notes\"\n",
			`serve.yml:2:12: slack.channel "#release notes": write a channel's name, like "#iterion", or its id, like C0123ABCD`},
		{"slack user by name", "slack:\n  users: {ana: ana}\n",
			`serve.yml:2:11: slack.users key "ana": write a Slack user's id, like U0123ABCD (their profile, "Copy member ID")`},
		{"slack user mapped to no GitHub login", "slack:\n  users: {U1: \"ana smith\"}\n",
			`serve.yml:2:15: slack.users.U1 "ana smith": write the person's GitHub login, like octocat`},
		{"slack user mapped twice", "slack:\n  users: {U1: ana, U1: bo}\n",
			`serve.yml:2:20: slack.users "U1" is set twice (also at line 2): keep one`},
		{"slack allowed not a login", "slack:\n  allowed: [\"@ana\"]\n",
			`serve.yml:2:13: slack.allowed[0]: write a GitHub login, like octocat`},
		{"slack workflow not a .bot file", "slack:\n  workflows: {nightly: nightly.yml}\n",
			`serve.yml:2:24: slack.workflows.nightly "nightly.yml": write the path of a .bot file, relative to this file's directory`},
		{"slack token in the file, value not repeated", "slack:\n  bot_token: xoxb-hunter2\n",
			"serve.yml:2:3: slack.bot_token is a secret, and iterion serve reads secrets only from the environment: remove it and set ITERION_SLACK_BOT_TOKEN in the environment instead"},
		{"schedules not a list", "schedules: nightly\n",
			"serve.yml:1:12: schedules: write a list of mappings with the keys name, cron, timezone, workflow, vars, overlap, grace, report, not a single value"},
		{"a schedule without its workflow", "schedules:\n  - name: n\n    cron: \"@daily\"\n",
			"serve.yml:2:5: schedules[0] needs workflow (every schedule has a name, a cron spec and a workflow file)"},
		{"a schedule's mistakes", "schedules:\n  - name: a b\n    cron: \"@nightly\"\n    timezone: Mars/Olympus\n    workflow: x.yaml\n    overlap: cancel\n    grace: 30s\n    report: {slak: x}\n    vars: [a]\n",
			`serve.yml:2:11: schedules[0].name "a b": use letters, digits, - and _ (at most 64)` + "\n" +
				`serve.yml:3:11: schedules[0].cron "@nightly": @nightly is not a descriptor: write @daily (midnight) or five fields like "0 3 * * *"` + "\n" +
				`serve.yml:4:15: schedules[0].timezone "Mars/Olympus": unknown time zone "Mars/Olympus": write an IANA name like Europe/Berlin or America/New_York` + "\n" +
				`serve.yml:5:15: schedules[0].workflow "x.yaml": write the path of a .bot file, relative to this file's directory` + "\n" +
				`serve.yml:6:14: schedules[0].overlap "cancel": use skip (the default: a tick while the last run goes on is skipped) or queue (it waits for that run)` + "\n" +
				`serve.yml:7:12: schedules[0].grace "30s": write a duration from 1m to 168h, like 1h` + "\n" +
				`serve.yml:8:14: unknown key "slak" in schedules[0].report: did you mean "slack"? (the keys in schedules[0].report are slack)` + "\n" +
				`serve.yml:9:11: schedules[0].vars: write a mapping of names to values, like {branch: main}, not a list`},
		{"a schedule twice, and two zones", "schedules:\n  - {name: n, cron: \"@daily\", workflow: a.bot}\n  - {name: n, cron: \"CRON_TZ=UTC @daily\", timezone: UTC, workflow: a.bot}\n",
			`serve.yml:3:12: schedules[1]: schedule "n" is declared twice (also at line 2): give each its own name` + "\n" +
				`serve.yml:3:21: schedules[1].cron "CRON_TZ=UTC @daily": the cron spec names a zone (CRON_TZ=) and so does timezone: keep one`},
		{"every mistake, in order", "log:\n  level: loud\n  format: xml\nshutdown_grace: soon\nwrokers: 2\n",
			`serve.yml:2:10: log.level "loud": use debug, info, warn or error` + "\n" +
				`serve.yml:3:11: log.format "xml": use text or json` + "\n" +
				`serve.yml:4:17: shutdown_grace "soon": write a duration, a number and a unit like 30s, 2m or 1m30s` + "\n" +
				`serve.yml:5:1: unknown key "wrokers": did you mean github.workers? It goes in the github section`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := defaultServeConfig()
			err := parseServeConfig("serve.yml", []byte(tc.in), &cfg)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("error:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestServeConfigSecretsRefused(t *testing.T) {
	t.Parallel()
	const fromEnv = " is a secret, and iterion serve reads secrets only from the environment: remove it and set "
	for _, tc := range []struct {
		name, in, want string
	}{
		{"webhook secret", "github:\n  webhook_secret: hunter2\n",
			"serve.yml:2:3: github.webhook_secret" + fromEnv + "ITERION_GITHUB_WEBHOOK_SECRET in the environment instead"},
		{"webhook secret at the top", "webhook_secret: hunter2\n",
			"serve.yml:1:1: webhook_secret" + fromEnv + "ITERION_GITHUB_WEBHOOK_SECRET in the environment instead"},
		{"webhook secret, short name", "github:\n  secret: hunter2\n",
			"serve.yml:2:3: github.secret" + fromEnv + "ITERION_GITHUB_WEBHOOK_SECRET in the environment instead"},
		{"private key", "github:\n  private_key: |\n    -----BEGIN RSA PRIVATE KEY-----\n    hunter2\n",
			"serve.yml:2:3: github.private_key" + fromEnv + "ITERION_GITHUB_PRIVATE_KEY in the environment instead (PEM text or a file path), or write the file's path as github.private_key_file"},
		{"private key text as the file's path", "github:\n  private_key_file: \"-----BEGIN RSA PRIVATE KEY-----\\nhunter2\"\n",
			"serve.yml:2:21: github.private_key_file holds the key itself, a secret, not the path of its file: remove it and set ITERION_GITHUB_PRIVATE_KEY in the environment, or write the file's path"},
		{"api token", "api:\n  token: hunter2\n",
			"serve.yml:2:3: api.token" + fromEnv + "ITERION_API_TOKEN in the environment instead"},
		{"api token at the top, in capitals", "API_TOKEN: hunter2\n",
			"serve.yml:1:1: API_TOKEN" + fromEnv + "ITERION_API_TOKEN in the environment instead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := defaultServeConfig()
			err := parseServeConfig("serve.yml", []byte(tc.in), &cfg)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("error:\n got %s\nwant %s", got, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the message repeats the secret: %s", err)
			}
		})
	}
}

func TestServeConfigDecodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "serve.yml")
	full := `# every setting
addr: 127.0.0.1:9000
store: data            # relative to this file
shutdown_grace: 1m30s
retention: 48h
log:
  level: debug
  format: json
github:
  app_id: 123456
  api_url: https://ghe.example.com/api/v3/
  git_url: https://ghe.example.com
  workers: 8
  private_key_file: /etc/iterion/app.pem
  keep_workspaces: 72h
sandbox:
  driver: docker
  allow_host: true
  allow_network: true
  network: model-only
  docker_image: golang:1.26
  docker_images: ["node:20"]
  max_parallel_branches: 3
  workspace_quota_mb: 2048
  mounts: [/srv/gomod:/home/iterion/go/pkg/mod:rw]
  limits:
    memory_mb: 1024
    processes: 100
    open_files: 256
    cpu_time: 10m
slack:
  transport: socket
  channel: "#iterion"
  users: {U0123ABCD: ana, W0456EFGH: bo}
  allowed: [ana]
  workflows: {nightly: workflows/nightly.bot}
  workers: 2
webhooks:
  memory_mb: 64
  bodies: 256
  body_timeout: 5s
api: {}
schedules:
  - name: docs
    cron: "0 3 * * 1-5"
    timezone: Europe/Berlin
    workflow: workflows/docs.bot   # relative to this file
    vars: {branch: main}
    overlap: queue
    grace: 2h
    report:
      slack: "#docs"
page:
  public_url: https://iterion.example.com
  allowed_orgs: [acme]
  allowed_teams: [acme/maintainers]
  session_ttl: 8h
`
	for _, tc := range []struct {
		name, in string
		want     serveConfig
	}{
		{"empty file", "", defaultServeConfig()},
		{"comments only", "# nothing yet\n", defaultServeConfig()},
		{"empty sections keep the defaults", "log:\ngithub: ~\napi:\naddr:\n", defaultServeConfig()},
		{"every setting", full, serveConfig{
			Addr:          "127.0.0.1:9000",
			Store:         filepath.Join(dir, "data"),
			ShutdownGrace: 90 * time.Second,
			Retention:     48 * time.Hour,
			Log:           logSettings{Level: "debug", Format: "json"},
			GitHub: githubFile{AppID: 123456, APIURL: "https://ghe.example.com/api/v3/", GitURL: "https://ghe.example.com",
				Workers: 8, PrivateKeyFile: "/etc/iterion/app.pem", KeepWorkspaces: 72 * time.Hour},
			Sandbox: sandboxSettings{Driver: "docker", AllowHost: true, AllowNetwork: true, Network: "model-only", DockerImage: "golang:1.26", DockerImages: []string{"node:20"}, MaxParallelBranches: 3, WorkspaceQuotaMB: 2048,
				Mounts: []string{"/srv/gomod:/home/iterion/go/pkg/mod:rw"},
				Limits: sandboxLimits{MemoryMB: 1024, Processes: 100, OpenFiles: 256, CPUTime: 10 * time.Minute}},
			Slack: slackFile{Transport: "socket", Channel: "#iterion", Users: map[string]string{"U0123ABCD": "ana", "W0456EFGH": "bo"},
				Allowed: []string{"ana"}, Workflows: map[string]string{"nightly": filepath.Join(dir, "workflows", "nightly.bot")}, Workers: 2},
			Webhooks: webhookSettings{MemoryMB: 64, Bodies: 256, BodyTimeout: 5 * time.Second},
			Schedules: []serverSchedule{{Name: "docs", Cron: "0 3 * * 1-5", Timezone: "Europe/Berlin", Workflow: filepath.Join(dir, "workflows", "docs.bot"),
				Vars: map[string]string{"branch": "main"}, Overlap: "queue", Grace: 2 * time.Hour, Report: serverReport{Slack: "#docs"}}},
			Page: pageFile{PublicURL: "https://iterion.example.com", AllowedOrgs: []string{"acme"}, AllowedTeams: []string{"acme/maintainers"}, SessionTTL: 8 * time.Hour},
		}},
		{"one key of a section keeps the others", "log: {format: json}\ngithub:\n  private_key_file: keys/app.pem\n", serveConfig{
			Addr:          ":8080",
			ShutdownGrace: 30 * time.Second,
			Retention:     720 * time.Hour,
			Log:           logSettings{Level: "info", Format: "json"},
			GitHub:        githubFile{GitURL: "https://github.com", Workers: 4, PrivateKeyFile: filepath.Join(dir, "keys", "app.pem"), KeepWorkspaces: 168 * time.Hour},
			Sandbox:       sandboxSettings{WorkspaceQuotaMB: 10240},
			Slack:         slackFile{Transport: "http", Workers: 4},
			Webhooks:      webhookSettings{MemoryMB: 32, Bodies: 1024, BodyTimeout: 10 * time.Second},
			Page:          pageFile{SessionTTL: 12 * time.Hour},
		}},
		{"anchors and aliases", "addr: &a 127.0.0.1:1\nlog: {level: &l warn}\n", serveConfig{
			Addr:          "127.0.0.1:1",
			ShutdownGrace: 30 * time.Second,
			Retention:     720 * time.Hour,
			Log:           logSettings{Level: "warn", Format: "text"},
			GitHub:        githubFile{GitURL: "https://github.com", Workers: 4, KeepWorkspaces: 168 * time.Hour},
			Sandbox:       sandboxSettings{WorkspaceQuotaMB: 10240},
			Slack:         slackFile{Transport: "http", Workers: 4},
			Webhooks:      webhookSettings{MemoryMB: 32, Bodies: 1024, BodyTimeout: 10 * time.Second},
			Page:          pageFile{SessionTTL: 12 * time.Hour},
		}},
	} {
		// Serial: the cases share one config file.
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := (&App{}).loadServeConfig(path, "--config")
			if err != nil {
				t.Fatal(err)
			}
			if tc.in != "" || got.file != "" {
				tc.want.file = path
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(serveConfig{})); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServeConfigFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.yml")
	for _, tc := range []struct {
		name, path, via, want string
	}{
		{"missing, from the flag", missing, "--config",
			"config file " + missing + " (--config) does not exist: check the path, which is relative to the current directory"},
		{"missing, from the variable", missing, "$ITERION_CONFIG",
			"config file " + missing + " ($ITERION_CONFIG) does not exist: check the path, which is relative to the current directory"},
		{"a directory", dir, "--config",
			"reading config file " + dir + " (--config): read " + dir + ": is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := (&App{}).loadServeConfig(tc.path, tc.via)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestServeSettingsPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "serve.yml")
	if err := os.WriteFile(file, []byte("addr: 127.0.0.1:3\nstore: /srv/file-store\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                string
		flags               serveFlags
		env                 map[string]string
		wantAddr, wantStore string
		wantFile            string
	}{
		{name: "defaults", wantAddr: ":8080", wantStore: ".iterion"},
		{name: "file over defaults", flags: serveFlags{config: file},
			wantAddr: "127.0.0.1:3", wantStore: "/srv/file-store", wantFile: file},
		{name: "file named by the variable", env: map[string]string{"ITERION_CONFIG": file},
			wantAddr: "127.0.0.1:3", wantStore: "/srv/file-store", wantFile: file},
		{name: "flag names the file over the variable", flags: serveFlags{config: file}, env: map[string]string{"ITERION_CONFIG": filepath.Join(dir, "nope.yml")},
			wantAddr: "127.0.0.1:3", wantStore: "/srv/file-store", wantFile: file},
		{name: "environment over file", flags: serveFlags{config: file}, env: map[string]string{"ITERION_ADDR": "127.0.0.1:2", "ITERION_STORE": "/srv/env-store"},
			wantAddr: "127.0.0.1:2", wantStore: "/srv/env-store", wantFile: file},
		{name: "flags over environment", flags: serveFlags{config: file, addr: "127.0.0.1:1", store: "/srv/flag-store"},
			env:      map[string]string{"ITERION_ADDR": "127.0.0.1:2", "ITERION_STORE": "/srv/env-store"},
			wantAddr: "127.0.0.1:1", wantStore: "/srv/flag-store", wantFile: file},
		{name: "environment over defaults", env: map[string]string{"ITERION_ADDR": "127.0.0.1:2"},
			wantAddr: "127.0.0.1:2", wantStore: ".iterion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			for k, v := range tc.env {
				c.setenv(k, v)
			}
			cfg, err := c.app(nil, nil, nil).serveSettings(tc.flags)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Addr != tc.wantAddr || cfg.Store != tc.wantStore || cfg.file != tc.wantFile {
				t.Errorf("addr, store, file = %q, %q, %q; want %q, %q, %q", cfg.Addr, cfg.Store, cfg.file, tc.wantAddr, tc.wantStore, tc.wantFile)
			}
		})
	}
}

func TestGitHubSettingsPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fileKey, envKey := filepath.Join(dir, "file.pem"), filepath.Join(dir, "env.pem")
	for path, text := range map[string]string{fileKey: "-----BEGIN FILE KEY-----\n", envKey: "-----BEGIN ENV KEY-----\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := githubFile{AppID: 7, APIURL: "https://file.example/api/v3/", GitURL: "https://file.example/", Workers: 2, PrivateKeyFile: fileKey}
	for _, tc := range []struct {
		name    string
		file    githubFile
		env     map[string]string
		want    githubConfig
		wantOK  bool
		wantErr string
	}{
		{name: "no App anywhere", file: defaultServeConfig().GitHub},
		{name: "the file, with the secret from the environment", file: file,
			env:    map[string]string{"ITERION_GITHUB_WEBHOOK_SECRET": "s"},
			want:   githubConfig{appID: 7, key: []byte("-----BEGIN FILE KEY-----\n"), secret: []byte("s"), apiURL: "https://file.example/api/v3/", gitURL: "https://file.example", workers: 2, keepWorkspaces: 168 * time.Hour},
			wantOK: true},
		{name: "the environment over the file", file: file,
			env: map[string]string{"ITERION_GITHUB_APP_ID": "9", "ITERION_GITHUB_WEBHOOK_SECRET": "s", "ITERION_GITHUB_PRIVATE_KEY": envKey,
				"ITERION_GITHUB_API_URL": "https://env.example/api/v3/", "ITERION_GITHUB_URL": "https://env.example"},
			want:   githubConfig{appID: 9, key: []byte("-----BEGIN ENV KEY-----\n"), secret: []byte("s"), apiURL: "https://env.example/api/v3/", gitURL: "https://env.example", workers: 2, keepWorkspaces: 168 * time.Hour},
			wantOK: true},
		{name: "PEM text in the environment over the file's key file", file: file,
			env:    map[string]string{"ITERION_GITHUB_WEBHOOK_SECRET": "s", "ITERION_GITHUB_PRIVATE_KEY": "-----BEGIN PEM TEXT-----"},
			want:   githubConfig{appID: 7, key: []byte("-----BEGIN PEM TEXT-----"), secret: []byte("s"), apiURL: "https://file.example/api/v3/", gitURL: "https://file.example", workers: 2, keepWorkspaces: 168 * time.Hour},
			wantOK: true},
		{name: "the defaults under the environment", file: defaultServeConfig().GitHub,
			env:    map[string]string{"ITERION_GITHUB_APP_ID": "9", "ITERION_GITHUB_WEBHOOK_SECRET": "s", "ITERION_GITHUB_PRIVATE_KEY": envKey},
			want:   githubConfig{appID: 9, key: []byte("-----BEGIN ENV KEY-----\n"), secret: []byte("s"), gitURL: "https://github.com", workers: 4, keepWorkspaces: 168 * time.Hour},
			wantOK: true},
		{name: "App id from the file, no secret", file: file,
			wantErr: "a GitHub App is configured (github.app_id in serve.yml) but ITERION_GITHUB_WEBHOOK_SECRET is not set: set it to the App's webhook secret"},
		{name: "App id from the file, no key", file: githubFile{AppID: 7},
			env:     map[string]string{"ITERION_GITHUB_WEBHOOK_SECRET": "s"},
			wantErr: "a GitHub App is configured but ITERION_GITHUB_PRIVATE_KEY is not set: set it to the App's private key (PEM text, or the path of the .pem file), or write the file's path as github.private_key_file in the config file"},
		{name: "the file's key file unreadable", file: githubFile{AppID: 7, PrivateKeyFile: filepath.Join(dir, "nope.pem")},
			env:     map[string]string{"ITERION_GITHUB_WEBHOOK_SECRET": "s"},
			wantErr: "github.private_key_file in serve.yml names a file that cannot be read: open " + filepath.Join(dir, "nope.pem") + ": no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			for k, v := range tc.env {
				c.setenv(k, v)
			}
			got, ok, err := c.app(nil, nil, nil).githubSettings(tc.file, "serve.yml")
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error:\n got %v\nwant %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.wantOK {
				t.Fatalf("ok=%v err=%v, want ok=%v", ok, err, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(githubConfig{})); ok && diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServeWithConfigFile starts serve with only --config: it listens on
// the file's address, keeps its store where the file says (relative to
// the file) and logs as the file says.
func TestServeWithConfigFile(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	root := t.TempDir()
	c.dir = root
	conf := filepath.Join(root, "etc", "serve.yml")
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("addr: 127.0.0.1:0\nstore: ../data\nshutdown_grace: 5s\nlog:\n  level: debug\n  format: json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		code := c.exec(ctx, nil, pw, &stderr, "serve", "--config", "etc/serve.yml")
		pw.Close()
		done <- code
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatalf("serve did not start: %s", stderr.String())
	}
	line := sc.Text()
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	// etc/../data: the store is relative to the file's directory.
	if !strings.HasPrefix(line, "iterion serve listening on http://127.0.0.1:") || !strings.HasSuffix(line, "(store data)") {
		t.Fatalf("listening line %q, want 127.0.0.1 and the store data", line)
	}
	base := strings.Fields(strings.SplitAfter(line, "listening on ")[1])[0]
	if _, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://")); port == "8080" {
		t.Errorf("serve listens on the default port: %s", base)
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("healthz = %d", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(root, "data", ownerFile)); err != nil {
		t.Errorf("store: %v", err)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("serve exited %d: %s", code, stderr.String())
	}
	// The debug line is logged as JSON only when both log settings apply.
	var debug map[string]any
	for l := range strings.Lines(stderr.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		if rec["msg"] == "config file read" {
			debug = rec
		}
	}
	if debug == nil || debug["level"] != "DEBUG" || debug["file"] != "etc/serve.yml" {
		t.Errorf("no debug record of the config file in the log:\n%s", stderr.String())
	}
}

// TestServeBadConfigStartsNothing: a file with a mistake is reported and
// neither the store nor the listener is touched.
func TestServeBadConfigStartsNothing(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	root := t.TempDir()
	c.dir = root
	if err := os.WriteFile(filepath.Join(root, "serve.yml"), []byte("addr: 127.0.0.1:0\nstore: data\nlog:\n  level: verbose\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.setenv("ITERION_CONFIG", "serve.yml")
	code, out, errOut := c.run("serve")
	want := "iterion: serve.yml:4:10: log.level \"verbose\": use debug, info, warn or error\n"
	if code != exitError || out != "" || errOut != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and stderr %q", code, out, errOut, want)
	}
	if _, err := os.Stat(filepath.Join(root, "data")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store was created (%v)", err)
	}
}

// FuzzServeConfig: the parser never panics, every mistake is reported at
// a line of the file, and whatever it accepts is a configuration serve
// can use.
func FuzzServeConfig(f *testing.F) {
	for _, seed := range []string{
		"", "addr: :1\n", "log: {level: debug, format: json}\n", "github:\n  app_id: 1\n  workers: 2\n",
		"shutdown_grace: 1m\n", "a: &x {b: *x}\n", "log: &l {level: *l}\n", "<<: {addr: :1}\n",
		"- 1\n", "addr: [1, {2: 3}]\n", "x: 1\n---\ny: 2\n", "github:\n  webhook_secret: s\n", "? [a]\n: b\n",
		"log: !!map {level: info}\n", "addr: !!binary aGVsbG8=\n", "shutdown_grace: !!int 5\n",
		"schedules:\n  - {name: n, cron: \"@daily\", workflow: a.bot, vars: {a: b}}\n", "schedules: [{vars: {a: [1]}}, 3]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := defaultServeConfig()
		err := parseServeConfig("f.yml", data, &cfg)
		if err != nil {
			var errs configErrors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error %T is not positioned: %v", err, err)
			}
			for _, e := range errs {
				if e.File != "f.yml" || e.Line < 1 || e.Message == "" {
					t.Errorf("error without a position or a message: %+v", e)
				}
			}
			return
		}
		if _, ok := logLevels[cfg.Log.Level]; !ok || (cfg.Log.Format != "text" && cfg.Log.Format != "json") {
			t.Errorf("accepted log settings %+v", cfg.Log)
		}
		if cfg.GitHub.Workers < 1 || cfg.GitHub.AppID < 0 || cfg.ShutdownGrace < 0 {
			t.Errorf("accepted %+v", cfg)
		}
		if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
			t.Errorf("accepted addr %q", cfg.Addr)
		}
	})
}
