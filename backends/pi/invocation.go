package pi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
)

// invocation is what both transports share for one execution of a node:
// its directory (removed at the end), the resolved model and effort, the
// files pi reads, and so its argv, environment and mounts.
type invocation struct {
	dir        string
	agentDir   string // the copy of the operator's agent directory
	sessionDir string
	filesDir   string // read-only inside: the prompt and the extension
	systemFile string // "" when the node has no system text
	extFile    string // "" in print mode
	resumeFile string // the paused session written back, "" for a new one
	saved      *savedSession

	// route, sess and open are how pi reaches its providers: the run
	// channel's model proxy, and the open network when the node asks.
	route *route
	sess  *runchannel.Session
	open  bool

	launcher *launcher
	model    modelRef
	thinking string
	trust    bool
	noCtx    bool
	// tools, when set, is pi's tool allowlist (--tools): a readonly node's
	// reading tools and its interaction tools.
	tools []string
}

// modelRef is a node's model as pi takes it: a provider and a model id, or
// a bare pattern pi resolves itself (then provider is "").
type modelRef struct{ provider, id string }

func (m modelRef) String() string {
	if m.provider == "" {
		return m.id
	}
	return m.provider + "/" + m.id
}

// resolveModel reads a node's model: "<provider>/<model>" names both (the
// model id may itself hold slashes, as openrouter's do); a bare name is a
// pattern pi matches; "" leaves pi its default.
func resolveModel(model string) modelRef {
	model = strings.TrimSpace(model)
	if p, m, ok := strings.Cut(model, "/"); ok && p != "" && m != "" {
		return modelRef{provider: p, id: m}
	}
	return modelRef{id: model}
}

// mapEffort turns a node's reasoning_effort into pi's --thinking level.
// pi has no level above xhigh: max degrades to it.
func mapEffort(effort string) string {
	switch effort {
	case "low", "medium", "high", "xhigh":
		return effort
	case "max":
		return "xhigh"
	}
	return ""
}

// maxSession bounds a paused session carried in the checkpoint.
const maxSession = 32 << 20

// savedSession is a paused node's pi session, as the checkpoint keeps it
// (NeedsInteractionError.Conversation): the session file's name and bytes.
type savedSession struct {
	V       int    `json:"v"`
	File    string `json:"file"`
	Session string `json:"session"`
	// Tool is what paused: ask_user, await_answers, or "permission" (a
	// call held for a person, Call).
	Tool string    `json:"tool"`
	Call *toolCall `json:"call,omitempty"`
}

// prepare makes the execution's directory: the agent directory copy with
// pi's retries off, the sessions directory (holding the paused session
// when the node resumes), the system prompt file and, for RPC, the
// extension.
func (b *Backend) prepare(task *engine.Task) (inv *invocation, err error) {
	l, err := b.command()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(b.tempDir, "iterion-pi-")
	if err != nil {
		return nil, fmt.Errorf("creating the directory of a pi execution: %w", err)
	}
	inv = &invocation{dir: dir, launcher: l, model: resolveModel(task.Model), thinking: mapEffort(task.ReasoningEffort),
		agentDir: filepath.Join(dir, "agent"), sessionDir: filepath.Join(dir, "sessions"), filesDir: filepath.Join(dir, "files"),
		trust: b.env("ITERION_PI_TRUST_PROJECT") == "1", noCtx: b.env("ITERION_PI_NO_CONTEXT_FILES") == "1"}
	defer func() {
		if err != nil {
			inv.remove()
		}
	}()
	if task.ReadOnly {
		// pi's tools that cannot change the workspace (which the sandbox
		// mounts read-only besides), and the extension's.
		inv.tools = []string{"read", "grep", "find", "ls"}
		if b.mode == ModeRPC {
			for _, t := range asktools.For(task.Interaction) {
				inv.tools = append(inv.tools, t.Name)
			}
		}
	}
	for _, d := range []string{inv.sessionDir, inv.filesDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := copyAgentDir(b.operatorAgentDir(), inv.agentDir); err != nil {
		return nil, err
	}
	if err := disableRetries(filepath.Join(inv.agentDir, "settings.json")); err != nil {
		return nil, err
	}
	if text := b.systemPrompt(task); text != "" {
		inv.systemFile = filepath.Join(inv.filesDir, "system.md")
		if err := os.WriteFile(inv.systemFile, []byte(text), 0o600); err != nil {
			return nil, err
		}
	}
	if b.mode == ModeRPC {
		inv.extFile = filepath.Join(inv.filesDir, "iterion-pi.js")
		if err := os.WriteFile(inv.extFile, extensionJS, 0o600); err != nil {
			return nil, err
		}
	}
	if task.ResumeConversation != nil {
		var s savedSession
		if err := json.Unmarshal(task.ResumeConversation, &s); err != nil || s.V != 1 || s.File == "" || s.File != filepath.Base(s.File) {
			return nil, engine.NewBackendError(engine.CodeResumeInvalid, false, errors.New("the paused pi session in the checkpoint cannot be read (was it paused by another backend?)"))
		}
		inv.saved = &s
		inv.resumeFile = filepath.Join(inv.sessionDir, s.File)
		if err := os.WriteFile(inv.resumeFile, []byte(s.Session), 0o600); err != nil {
			return nil, err
		}
	}
	return inv, nil
}

// remove deletes the execution's directory.
func (inv *invocation) remove() { _ = os.RemoveAll(inv.dir) }

// systemPrompt is what the node adds to pi's own system prompt: its task
// and the protocol sections its tools need.
func (b *Backend) systemPrompt(task *engine.Task) string {
	var parts []string
	if s := strings.TrimSpace(task.System); s != "" {
		parts = append(parts, s)
	}
	if task.Interaction == "async" {
		parts = append(parts, asktools.SystemSection)
	}
	if task.OutputSchema != nil {
		parts = append(parts, engine.OutputSection(task.OutputSchema))
	}
	return strings.Join(parts, "\n\n")
}

// operatorAgentDir is the operator's pi agent directory:
// PI_CODING_AGENT_DIR, else ~/.pi/agent.
func (b *Backend) operatorAgentDir() string {
	if d := b.env("PI_CODING_AGENT_DIR"); d != "" {
		return d
	}
	home := b.env("HOME")
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".pi", "agent")
}

// argv is pi's command line for a transport ("rpc" or "json").
func (inv *invocation) argv(mode string) []string {
	a := append([]string(nil), inv.launcher.argv...)
	a = append(a, "--mode", mode)
	if inv.resumeFile != "" {
		a = append(a, "--session", inv.resumeFile)
	} else {
		a = append(a, "--session-dir", inv.sessionDir)
	}
	if inv.model.provider != "" {
		a = append(a, "--provider", inv.model.provider)
	}
	if inv.model.id != "" {
		a = append(a, "--model", inv.model.id)
	}
	if inv.thinking != "" {
		a = append(a, "--thinking", inv.thinking)
	}
	if inv.systemFile != "" {
		a = append(a, "--append-system-prompt", inv.systemFile)
	}
	if inv.noCtx {
		a = append(a, "--no-context-files")
	}
	if len(inv.tools) > 0 {
		a = append(a, "--tools", strings.Join(inv.tools, ","))
	}
	if !inv.trust {
		// pi would run the repository's .pi/extensions as code in the
		// process that holds the run's keys. --no-extensions keeps those
		// (and the operator's own) out; -e paths still load, so the
		// operator's extensions are named one by one.
		a = append(a, "--no-extensions")
		for _, e := range operatorExtensions(filepath.Join(inv.agentDir, "extensions")) {
			a = append(a, "-e", e)
		}
	}
	if inv.extFile != "" {
		a = append(a, "-e", inv.extFile)
	}
	return a
}

// env is pi's environment beyond the sandbox's own: its agent directory,
// no start-up network calls, and extra (the extension's configuration,
// print mode's keys).
func (inv *invocation) env(extra ...string) []string {
	env := []string{
		"PI_CODING_AGENT_DIR=" + inv.agentDir,
		"PI_OFFLINE=1",
		"PI_SKIP_VERSION_CHECK=1",
		"PI_TELEMETRY=0",
	}
	if inv.launcher.path != "" {
		env = append(env, "PATH="+inv.launcher.path)
	}
	return append(env, extra...)
}

// mounts are pi's installation (read-only), its agent directory and
// sessions (writable: they are this execution's copies) and its files
// (read-only).
func (inv *invocation) mounts() []engine.Mount {
	ms := append([]engine.Mount(nil), inv.launcher.mounts...)
	return append(ms,
		engine.Mount{Source: inv.agentDir, Writable: true},
		engine.Mount{Source: inv.sessionDir, Writable: true},
		engine.Mount{Source: inv.filesDir},
	)
}

// operatorExtensions lists the extensions pi would discover in the
// operator's extensions directory (its *.ts and *.js files, and its
// subdirectories' index.ts or index.js), so they still load under
// --no-extensions.
func operatorExtensions(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || name == "node_modules" {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		switch {
		case err != nil:
		case fi.Mode().IsRegular() && (strings.HasSuffix(name, ".ts") || strings.HasSuffix(name, ".js")):
			out = append(out, p)
		case fi.IsDir():
			for _, index := range []string{"index.ts", "index.js"} {
				if _, err := os.Stat(filepath.Join(p, index)); err == nil {
					out = append(out, filepath.Join(p, index))
					break
				}
			}
		}
	}
	return out
}

// maxAgentDir bounds the copy of the operator's agent directory.
const maxAgentDir = 512 << 20

// copyAgentDir copies the operator's agent directory src into dst, leaving
// out its sessions (pi's history of every project) and anything but
// directories, regular files and symbolic links (copied as links). A
// missing src gives an empty dst.
func copyAgentDir(src, dst string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	if src == "" {
		return nil
	}
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var total int64
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		if d.IsDir() && rel == "sessions" {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(target, 0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			if total += info.Size(); total > maxAgentDir {
				return fmt.Errorf("it holds more than %d MiB", maxAgentDir>>20)
			}
			return copyFile(path, target, info.Mode().Perm()|0o600)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("copying the pi agent directory %s (PI_CODING_AGENT_DIR): %w", src, err)
	}
	return nil
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// disableRetries turns pi's own retries off in the settings file of the
// agent directory copy: iterion's retry policy decides, and pi's attempts
// would be invisible to its accounting. pi's RPC command set_auto_retry
// writes the same setting; print mode has only this.
func disableRetries(path string) error {
	settings := map[string]any{}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(b, &settings); err != nil {
			return fmt.Errorf("the pi settings file %s (copied from PI_CODING_AGENT_DIR) is not JSON: %w", path, err)
		}
		if settings == nil {
			settings = map[string]any{}
		}
	}
	retry, _ := settings["retry"].(map[string]any)
	if retry == nil {
		retry = map[string]any{}
	}
	retry["enabled"] = false
	settings["retry"] = retry
	out, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// process is pi's process for a transport, run with the execution's run
// channel: under its forwarder, on the model-only network unless the node
// asks for the open one.
func (inv *invocation) process(p *engine.Process) (*engine.Process, error) {
	p.Network = engine.NetworkDefault
	if inv.open {
		p.Network = engine.NetworkOpen
	}
	if inv.sess == nil {
		return p, nil
	}
	return inv.sess.Wrap(p)
}

// runtimeKey is the key the extension sets as pi's runtime key for
// provider: the proxy's dummy key when the proxy carries it; with the
// open network, the server's real key for one it does not; else none.
func (b *Backend) runtimeKey(inv *invocation, provider string) string {
	switch {
	case inv.proxied(provider):
		return inv.sess.Key()
	case inv.open:
		_, key := b.providerKey(provider, inv.agentDir)
		return key
	}
	return ""
}

// proxied reports whether the model proxy carries provider's calls.
func (inv *invocation) proxied(provider string) bool {
	return inv.route != nil && inv.route.proxied[provider]
}
