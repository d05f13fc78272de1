package pi

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// The real keys stay outside the sandbox: the run channel's model proxy
// adds them (route.go), and pi holds a dummy key. Only for a provider the
// proxy cannot carry, on a node that asks for the open network, does a
// real key reach pi, by one path, providerKey: the RPC transport hands it
// to the extension over pi's stdin, which sets it as pi's runtime key (so
// it is in pi's memory, not its environment or files, though the open
// network and pi's process are within the agent's reach); print mode,
// which has no channel, passes it as the variable pi reads.

// builtinKeyVars are the variables pi reads the key of a built-in provider
// from (pi-ai's env-api-keys, 0.73.1), in pi's order of preference.
var builtinKeyVars = map[string][]string{
	"anthropic":              {"ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"},
	"openai":                 {"OPENAI_API_KEY"},
	"azure-openai-responses": {"AZURE_OPENAI_API_KEY"},
	"deepseek":               {"DEEPSEEK_API_KEY"},
	"google":                 {"GEMINI_API_KEY"},
	"google-vertex":          {"GOOGLE_CLOUD_API_KEY"},
	"groq":                   {"GROQ_API_KEY"},
	"cerebras":               {"CEREBRAS_API_KEY"},
	"xai":                    {"XAI_API_KEY"},
	"openrouter":             {"OPENROUTER_API_KEY"},
	"vercel-ai-gateway":      {"AI_GATEWAY_API_KEY"},
	"zai":                    {"ZAI_API_KEY"},
	"mistral":                {"MISTRAL_API_KEY"},
	"minimax":                {"MINIMAX_API_KEY"},
	"minimax-cn":             {"MINIMAX_CN_API_KEY"},
	"moonshotai":             {"MOONSHOT_API_KEY"},
	"moonshotai-cn":          {"MOONSHOT_API_KEY"},
	"huggingface":            {"HF_TOKEN"},
	"fireworks":              {"FIREWORKS_API_KEY"},
	"opencode":               {"OPENCODE_API_KEY"},
	"opencode-go":            {"OPENCODE_API_KEY"},
	"kimi-coding":            {"KIMI_API_KEY"},
	"github-copilot":         {"COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"},
}

// envName is what a models.json apiKey must look like to name a variable.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// providerKey is the key the server holds for a provider: the variable pi
// would read and its value, or "" when the server has none (pi may still
// have the operator's login in auth.json, or a literal key in models.json).
// Custom providers are those of the agent directory's models.json whose
// apiKey names a variable.
func (b *Backend) providerKey(provider, agentDir string) (name, value string) {
	vars := builtinKeyVars[provider]
	if v := customKeyVar(agentDir, provider); v != "" {
		vars = []string{v}
	}
	for _, v := range vars {
		if val := b.env(v); val != "" {
			return v, val
		}
	}
	return "", ""
}

// printKeyEnv is the environment that carries the keys in print mode: the
// proxy's dummy key under the variable of each built-in provider it
// carries and, with the open network only, the real keys of the providers
// it does not carry (the node's, or for a model pi resolves itself, every
// provider the server holds a key for).
func (b *Backend) printKeyEnv(inv *invocation) []string {
	providers := []string{inv.model.provider}
	if inv.model.provider == "" {
		providers = nil
		for p := range builtinKeyVars {
			providers = append(providers, p)
		}
		providers = append(providers, customProviders(inv.agentDir)...)
		slices.Sort(providers)
	}
	var env []string
	for _, p := range providers {
		if inv.proxied(p) {
			continue // its models.json entry holds the dummy key
		}
		if !inv.open {
			continue
		}
		if name, val := b.providerKey(p, inv.agentDir); name != "" && !slices.Contains(env, name+"="+val) {
			env = append(env, name+"="+val)
		}
	}
	return env
}

// modelsFile is the part of pi's models.json iterion reads.
type modelsFile struct {
	Providers map[string]struct {
		APIKey string `json:"apiKey"`
	} `json:"providers"`
}

// readModels reads the agent directory's models.json (JSON with comments,
// as pi allows); a missing or unreadable file declares nothing (pi reports
// its own errors).
func readModels(agentDir string) modelsFile {
	var m modelsFile
	b, err := os.ReadFile(filepath.Join(agentDir, "models.json"))
	if err != nil {
		return m
	}
	if json.Unmarshal(b, &m) != nil {
		_ = json.Unmarshal(stripJSONComments(b), &m)
	}
	return m
}

func customKeyVar(agentDir, provider string) string {
	p, ok := readModels(agentDir).Providers[provider]
	if !ok || !envName.MatchString(p.APIKey) {
		return ""
	}
	return p.APIKey
}

func customProviders(agentDir string) []string {
	var out []string
	for name := range readModels(agentDir).Providers {
		out = append(out, name)
	}
	return out
}

// stripJSONComments removes // and /* */ comments outside strings.
func stripJSONComments(b []byte) []byte {
	var out bytes.Buffer
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			out.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
			out.WriteByte(c)
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			out.WriteByte('\n')
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			end := bytes.Index(b[i+2:], []byte("*/"))
			if end < 0 {
				return out.Bytes()
			}
			i += end + 3
		default:
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}

// SubscriptionOAuthNotice is the warning of a node whose only Anthropic
// credential is a Claude subscription's OAuth token: Anthropic bills a
// third-party client against the subscription's extra-usage balance, not
// its plan (ADR-085).
const SubscriptionOAuthNotice = "this node calls Anthropic with a Claude subscription (OAuth) credential from a client other than Claude Code: Anthropic bills it against the subscription's extra-usage balance, not the plan's limits. Set ANTHROPIC_API_KEY to use an API key instead, or ITERION_FORBID_SUBSCRIPTION_OAUTH=1 to refuse such nodes"

// forbiddenSubscription is the refusal of such a node under
// ITERION_FORBID_SUBSCRIPTION_OAUTH=1.
const forbiddenSubscription = "this node would call Anthropic with a Claude subscription (OAuth) credential, which ITERION_FORBID_SUBSCRIPTION_OAUTH=1 refuses: set ANTHROPIC_API_KEY, or run the node on claude_code"

// subscriptionOnly reports whether a node on provider would call
// Anthropic with a subscription's OAuth token: the key the server holds
// is ANTHROPIC_OAUTH_TOKEN, or it holds none and the operator's login in
// auth.json is an OAuth one. runtime says the server's key wins over
// auth.json (the RPC transport sets it as pi's runtime key); in print mode
// auth.json wins over the environment.
func (b *Backend) subscriptionOnly(provider, agentDir string, runtime bool) bool {
	if provider != "anthropic" {
		return false
	}
	name, _ := b.providerKey(provider, agentDir)
	login := authLogin(agentDir, provider)
	if login != "" && (!runtime || name == "") {
		return login == "oauth"
	}
	return name == "ANTHROPIC_OAUTH_TOKEN"
}

// authLogin is the type ("oauth", "api_key") of the operator's stored
// login for provider in auth.json, "" when there is none.
func authLogin(agentDir, provider string) string {
	b, err := os.ReadFile(filepath.Join(agentDir, "auth.json"))
	if err != nil {
		return ""
	}
	var logins map[string]struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(b, &logins) != nil {
		return ""
	}
	return strings.TrimSpace(logins[provider].Type)
}
