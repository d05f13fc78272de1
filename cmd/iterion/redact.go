package main

import (
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/iterion-bot/iterion/engine"
)

// secretEnvs are the environment variables whose values are this server's
// secrets: the model keys the backends read (claw's, and the Anthropic
// token CLI agents take), the API token, the GitHub App's webhook secret
// and its private key (PEM text; a path there names the file whose
// contents are the secret), the admin page's admin token, the App's
// OAuth client secret, and Slack's tokens and signing secret.
var secretEnvs = []string{
	"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY",
	"ITERION_API_TOKEN", "ITERION_GITHUB_WEBHOOK_SECRET", "ITERION_GITHUB_PRIVATE_KEY",
	"ITERION_ADMIN_TOKEN", "ITERION_GITHUB_CLIENT_SECRET",
	"ITERION_SLACK_BOT_TOKEN", "ITERION_SLACK_SIGNING_SECRET", "ITERION_SLACK_APP_TOKEN",
}

// envRedactor returns the Redactor of the secrets in this process's
// environment: secretEnvs, and the key variable (api_key_env) of each
// provider of the ITERION_PROVIDERS file. Every command that executes runs
// scrubs them from what the runs store, print and log.
func (a *App) envRedactor() *engine.Redactor {
	names := slices.Clone(secretEnvs)
	// A providers file that cannot be read is reported by backends().
	if providers, err := a.loadProviders(); err == nil {
		for _, p := range providers {
			names = append(names, p.APIKeyEnv)
		}
	}
	r := engine.NewRedactor()
	for _, name := range names {
		r.Add(a.secretValue(name, a.getenv(name)))
	}
	return r
}

// serveRedactor is envRedactor completed with serve's config: the
// variables named under secrets: and the App's key file named by
// github.private_key_file. A name under secrets: that is not set (or too
// short to scrub) is logged, since its secret then goes unprotected.
func (a *App) serveRedactor(cfg serveConfig, log *slog.Logger) *engine.Redactor {
	r := a.envRedactor()
	for _, name := range cfg.Secrets {
		v := a.getenv(name)
		if len(strings.TrimSpace(v)) < engine.MinSecretLen {
			log.Warn("a variable named under secrets: is not set, or is too short to be scrubbed", "name", name, "min_length", engine.MinSecretLen)
			continue
		}
		r.Add(v)
	}
	if f := cfg.GitHub.PrivateKeyFile; f != "" {
		if b, err := os.ReadFile(a.path(f)); err == nil {
			r.Add(string(b))
		}
	}
	return r
}

// secretValue is the secret held by variable name set to v: v itself, but
// for ITERION_GITHUB_PRIVATE_KEY naming a file, the file's contents.
func (a *App) secretValue(name, v string) string {
	if name != "ITERION_GITHUB_PRIVATE_KEY" || v == "" || strings.HasPrefix(strings.TrimSpace(v), "-----BEGIN") {
		return v
	}
	b, err := os.ReadFile(a.path(v))
	if err != nil {
		return "" // githubSettings reports it
	}
	return string(b)
}
