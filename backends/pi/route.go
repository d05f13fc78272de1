package pi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
)

// How pi reaches its model providers (issue 12, item 3). Every execution
// has a run channel (runchannel.Session) whose model proxy carries the
// providers iterion can carry: pi's own anthropic and openai, at the base
// URL the server's ANTHROPIC_BASE_URL and OPENAI_BASE_URL name (or their
// public one), and each provider of the operator's models.json with a
// baseUrl, an Anthropic or OpenAI API, and a key iterion can read (a
// variable of the server's environment, or a literal). In the execution's
// copy of the agent directory, each such provider's baseUrl is the proxy's
// and its apiKey the session's dummy key; the real key and the provider's
// headers stay in the server. The sandbox's network is then model-only:
// the proxy, and nothing else.
//
// What the proxy cannot carry (the operator's own logins in auth.json,
// OAuth tokens, a key read by a "!command", a Google API) needs the node
// to ask for the open network: pi then gets those keys as before (the
// extension's runtime key in RPC, the variable in print mode), and the
// agent's bash can read them. Without open, auth.json is left out of the
// copy and a node on such a provider is refused before pi starts, naming
// both ways out.

// proxiedAPIs are the APIs of models.json whose keys the proxy knows how
// to send.
var proxiedAPIs = map[string]runchannel.Auth{
	"anthropic-messages": runchannel.AuthAPIKey,
	"openai-completions": runchannel.AuthBearer,
	"openai-responses":   runchannel.AuthBearer,
}

// builtinAPI is the API of pi's built-in providers that the proxy
// carries.
var builtinAPI = map[string]string{
	runchannel.Anthropic: "anthropic-messages",
	runchannel.OpenAI:    "openai-responses",
}

// route is the model route of one execution.
type route struct {
	upstreams []runchannel.Upstream
	// proxied are the providers the proxy carries; refused says why each
	// other provider of models.json is not carried.
	proxied map[string]bool
	refused map[string]string
	// models is the agent directory copy's models.json, parsed (nil when
	// there is none), to rewrite once the session's URLs are known.
	models map[string]any
}

// planRoute decides which providers the proxy carries for an execution
// whose agent directory copy is agentDir.
func (b *Backend) planRoute(agentDir string) (*route, error) {
	rt := &route{proxied: map[string]bool{}, refused: map[string]string{}}
	path := filepath.Join(agentDir, "models.json")
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(stripJSONComments(data), &rt.models); err != nil {
			return nil, fmt.Errorf("the pi models file %s (copied from PI_CODING_AGENT_DIR) is not JSON: %w", path, err)
		}
	}
	declared, _ := rt.models["providers"].(map[string]any)
	env := runchannel.UpstreamsFromEnv(b.env)
	for _, up := range env {
		p, _ := declared[up.Name].(map[string]any)
		if p != nil {
			if base, _ := p["baseUrl"].(string); base != "" {
				up.BaseURL = base
			}
		}
		if up.Name == runchannel.Anthropic && b.env("ANTHROPIC_OAUTH_TOKEN") != "" && b.env("ANTHROPIC_API_KEY") == "" {
			rt.refused[up.Name] = "its key is a Claude subscription's OAuth token (ANTHROPIC_OAUTH_TOKEN), which pi sends in its own way"
			continue
		}
		if up.Key == "" {
			continue // pi may still have the operator's login: not ours to carry
		}
		if up.Name == runchannel.Anthropic && up.Auth == runchannel.AuthBearer {
			continue // ANTHROPIC_AUTH_TOKEN is Claude Code's, not pi's
		}
		if p != nil {
			if why := b.fillUpstream(&up, p, builtinAPI[up.Name]); why != "" {
				rt.refused[up.Name] = why
				continue
			}
		}
		rt.upstreams = append(rt.upstreams, up)
		rt.proxied[up.Name] = true
	}
	names := make([]string, 0, len(declared))
	for name := range declared {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if name == runchannel.Anthropic || name == runchannel.OpenAI {
			continue
		}
		p, _ := declared[name].(map[string]any)
		up := runchannel.Upstream{Name: name}
		up.BaseURL, _ = p["baseUrl"].(string)
		if up.BaseURL == "" {
			rt.refused[name] = "models.json gives it no baseUrl (iterion does not know the base URLs of pi's other built-in providers)"
			continue
		}
		if why := b.fillUpstream(&up, p, ""); why != "" {
			rt.refused[name] = why
			continue
		}
		if up.Key == "" {
			rt.refused[name] = "models.json gives it no apiKey"
			continue
		}
		rt.upstreams = append(rt.upstreams, up)
		rt.proxied[name] = true
	}
	return rt, nil
}

// fillUpstream completes up from its models.json entry p: the key its
// apiKey names, the auth its API takes, its headers. It returns why the
// proxy cannot carry it, or "".
func (b *Backend) fillUpstream(up *runchannel.Upstream, p map[string]any, defaultAPI string) string {
	api, _ := p["api"].(string)
	if api == "" {
		api = defaultAPI
	}
	auth, ok := proxiedAPIs[api]
	if !ok {
		return fmt.Sprintf("its API %q is not one the model proxy carries (anthropic-messages, openai-completions, openai-responses)", api)
	}
	if models, _ := p["models"].([]any); len(models) > 0 {
		for _, m := range models {
			if mm, _ := m.(map[string]any); mm != nil {
				if a, _ := mm["api"].(string); a != "" && a != api {
					return fmt.Sprintf("its model %v uses another API (%s) than the provider's", mm["id"], a)
				}
				if _, ok := mm["headers"]; ok {
					return fmt.Sprintf("its model %v declares headers of its own, which would be in the sandbox (give them at the provider's level, where the proxy adds them)", mm["id"])
				}
			}
		}
	}
	if overrides, _ := p["modelOverrides"].(map[string]any); len(overrides) > 0 {
		for id, o := range overrides {
			if oo, _ := o.(map[string]any); oo != nil {
				if _, ok := oo["headers"]; ok {
					return fmt.Sprintf("its model override %s declares headers, which would be in the sandbox (give them at the provider's level, where the proxy adds them)", id)
				}
			}
		}
	}
	if ah, _ := p["authHeader"].(bool); ah {
		auth = runchannel.AuthBearer
	}
	up.Auth = auth
	if raw, ok := p["apiKey"].(string); ok && raw != "" {
		key, name, why := b.resolveValue(raw)
		if why != "" {
			return "its apiKey " + why
		}
		up.Key, up.KeyEnv = key, name
	}
	if hs, _ := p["headers"].(map[string]any); len(hs) > 0 {
		up.Header = http.Header{}
		for k, v := range hs {
			raw, _ := v.(string)
			val, _, why := b.resolveValue(raw)
			if why != "" {
				return fmt.Sprintf("its header %s %s", k, why)
			}
			up.Header.Set(k, val)
		}
	}
	return ""
}

// resolveValue reads a models.json value as pi would: the variable it
// names when the server's environment has it, else the literal. A
// "!command" is pi's to run, not the server's.
func (b *Backend) resolveValue(raw string) (value, name, why string) {
	if strings.HasPrefix(raw, "!") {
		return "", "", "is a command (!…), which only pi runs"
	}
	if envName.MatchString(raw) {
		if v := b.env(raw); v != "" {
			return v, raw, ""
		}
		return "", "", fmt.Sprintf("names the variable %s, which the server's environment does not set", raw)
	}
	return raw, "", ""
}

// checkRoute refuses a node the route cannot serve, before pi starts:
// without the open network, its provider must be one the proxy carries.
func (b *Backend) checkRoute(rt *route, task *engine.Task, provider, agentDir string) error {
	if task.Network == engine.NetworkOpen || provider == "" || rt.proxied[provider] {
		return nil
	}
	if b.env("ITERION_FORBID_SUBSCRIPTION_OAUTH") == "1" && b.subscriptionOnly(provider, agentDir, b.mode == ModeRPC) {
		return engine.NewBackendError("AUTH_FAILED", false, errors.New(forbiddenSubscription))
	}
	why := rt.refused[provider]
	if why == "" {
		why = "the server holds no key for it"
		if login := authLogin(agentDir, provider); login != "" {
			why = fmt.Sprintf("its only credential is the operator's %s login in auth.json, which cannot go through the proxy", login)
		}
	}
	return engine.NewBackendError("AUTH_FAILED", false, fmt.Errorf(
		"node %s uses pi's provider %s, which iterion's model proxy cannot carry: %s. Set the provider's key in the server's environment (for a provider of models.json: a baseUrl, an anthropic-messages or openai-* api, and an apiKey naming that variable), or give the node's sandbox the open network, which puts that credential where the agent's commands can read it",
		task.NodeID, provider, why))
}

// withheldKey replaces, in the copy, the key of a provider the proxy does
// not carry on the model-only network: a literal that is no credential.
const withheldKey = "iterion-withheld-on-the-model-only-network"

// apply rewrites the agent directory copy for sess: each carried
// provider's baseUrl is the proxy's and its apiKey the dummy key, its
// headers gone (the proxy adds them); without the open network, the
// operator's logins (auth.json) are left out.
func (rt *route) apply(sess *runchannel.Session, agentDir string, open bool) error {
	if !open {
		if err := os.Remove(filepath.Join(agentDir, "auth.json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if len(rt.proxied) == 0 && rt.models == nil {
		return nil
	}
	if rt.models == nil {
		rt.models = map[string]any{}
	}
	providers, _ := rt.models["providers"].(map[string]any)
	if providers == nil {
		providers = map[string]any{}
		rt.models["providers"] = providers
	}
	if !open {
		// The providers the proxy does not carry are out of reach on the
		// model-only network: their credentials stay out of the copy.
		for name, v := range providers {
			if p, _ := v.(map[string]any); p != nil && !rt.proxied[name] {
				if _, ok := p["apiKey"]; ok {
					p["apiKey"] = withheldKey // pi refuses a provider with models and no key
				}
				delete(p, "headers")
			}
		}
	}
	for name := range rt.proxied {
		p, _ := providers[name].(map[string]any)
		if p == nil {
			// A built-in provider routed through the proxy, its models
			// kept (pi's "overriding built-in providers").
			p = map[string]any{}
			providers[name] = p
		}
		p["baseUrl"] = sess.BaseURL(name)
		p["apiKey"] = sess.Key()
		delete(p, "headers")
	}
	out, err := json.MarshalIndent(rt.models, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(agentDir, "models.json"), out, 0o600)
}
