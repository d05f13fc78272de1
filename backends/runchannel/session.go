package runchannel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// Options configure a Session. The zero value of each field means the
// default documented on it.
type Options struct {
	// Upstreams are the providers the model proxy forwards to. nil means
	// UpstreamsFromEnv(os.Getenv): anthropic and openai, at their
	// configured base URLs. A backend that knows more (custom providers of
	// pi's models.json) appends them to that list.
	Upstreams []Upstream
	// Transport makes the calls to the providers. nil means
	// http.DefaultTransport (which honours HTTPS_PROXY).
	Transport http.RoundTripper
	// Dir is where the session's private directory (mode 0700, holding the
	// socket) is made. "" means os.TempDir(). A unix socket's path is at
	// most 107 bytes, so keep it short.
	Dir string
	// Binary is the iterion executable that the sandbox runs (sandbox-exec
	// and the subcommands a CLI starts). "" means os.Executable(), which
	// is also what `go run` built. Tests give a test binary that
	// dispatches the same subcommands.
	Binary string

	// Ask serves a blocking ask_user, on a node that may interact: it
	// returns the text the model reads as the tool's result, or an error
	// whose text it reads instead. Suspending the run is the backend's
	// (end the CLI, return an engine.NeedsInteractionError from Execute);
	// Ask must honour ctx, which ends with the session. nil means
	// ask_user answers, as an error, that it cannot be served here.
	Ask func(ctx context.Context, q engine.AsyncQuestion) (string, error)
	// AwaitPending serves await_answers when questions are still pending
	// (with none pending, the answers are returned at once, as on every
	// backend): it returns the text the model reads. Suspending the run is
	// the backend's, as for Ask. nil means await_answers answers, as an
	// error, which questions are still pending.
	AwaitPending func(ctx context.Context, pending []engine.PendingQuestion) (string, error)
	// Permission decides whether a tool call of the CLI may run; its error
	// denies the call (fail closed). nil means the node's policy
	// (engine.Task.Permission) decides, as claw's gate does, and a call it
	// would hold for a person is refused, since nobody can be asked
	// without the backend: a backend that pauses the run on such a
	// question gives its own hook (permission.Policy.Decide, then a
	// question answered as claw's are).
	Permission func(ctx context.Context, req PermissionRequest) (PermissionDecision, error)

	// Logger receives a debug record per proxied model request (provider,
	// method, path, status, duration: never a header or a body) and the
	// failures. nil means no logging.
	Logger *slog.Logger
}

// Upstream is a model provider the proxy forwards to.
type Upstream struct {
	// Name routes: the CLI's base URL for this provider is
	// BaseURL(Name), and a request to it goes to BaseURL. Letters,
	// digits, '.', '_' and '-', at most 64.
	Name string
	// BaseURL is the provider's API root as the operator configured it
	// (https://api.anthropic.com, https://api.openai.com/v1, a gateway, a
	// fake model server on the host's loopback): a request for
	// BaseURL(Name)+"/v1/messages" goes to BaseURL+"/v1/messages".
	BaseURL string
	// Key is the real credential. It is sent to BaseURL alone and never
	// enters a sandbox, a log or an event. "" means the server has none:
	// requests are refused with a message naming KeyEnv.
	Key string
	// Auth says how Key is sent.
	Auth Auth
	// Header holds more headers the provider wants (a gateway's own
	// credential, say), added by the proxy to every request and never shown
	// to the sandbox.
	Header http.Header
	// KeyEnv names the server's variable the key comes from, for messages.
	KeyEnv string
}

// Auth is how an upstream's key is sent.
type Auth int

const (
	// AuthAPIKey sends the key as x-api-key (Anthropic's API keys).
	AuthAPIKey Auth = iota
	// AuthBearer sends it as Authorization: Bearer (OpenAI and the
	// OpenAI-compatible providers; Anthropic's ANTHROPIC_AUTH_TOKEN).
	AuthBearer
)

// The names of the well-known upstreams, whose variables Wrap sets.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
)

// Public base URLs of the well-known providers, when the server's
// environment names none.
const (
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
)

// UpstreamsFromEnv returns anthropic and openai as the server's
// environment configures them: ANTHROPIC_API_KEY (sent as x-api-key) or
// else ANTHROPIC_AUTH_TOKEN (sent as a bearer token), ANTHROPIC_BASE_URL;
// OPENAI_API_KEY, OPENAI_BASE_URL. A provider without a key is still
// listed: its requests are refused with a message naming the variable.
func UpstreamsFromEnv(getenv func(string) string) []Upstream {
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	anth := Upstream{Name: Anthropic, BaseURL: or(getenv("ANTHROPIC_BASE_URL"), DefaultAnthropicBaseURL),
		Key: getenv("ANTHROPIC_API_KEY"), Auth: AuthAPIKey, KeyEnv: "ANTHROPIC_API_KEY"}
	if anth.Key == "" && getenv("ANTHROPIC_AUTH_TOKEN") != "" {
		anth.Key, anth.Auth, anth.KeyEnv = getenv("ANTHROPIC_AUTH_TOKEN"), AuthBearer, "ANTHROPIC_AUTH_TOKEN"
	}
	return []Upstream{anth, {Name: OpenAI, BaseURL: or(getenv("OPENAI_BASE_URL"), DefaultOpenAIBaseURL),
		Key: getenv("OPENAI_API_KEY"), Auth: AuthBearer, KeyEnv: "OPENAI_API_KEY"}}
}

// Environment variables of the channel, set by Wrap for the CLI and read
// by ClientFromEnv inside the sandbox.
const (
	EnvChannel = "ITERION_CHANNEL"       // the socket's path
	EnvToken   = "ITERION_CHANNEL_TOKEN" // the session's token
	EnvRun     = "ITERION_RUN_ID"
	EnvNode    = "ITERION_NODE_ID"
)

// Session is the channel of one execution of a node: its socket, its
// dummy key and token, the proxy and the interaction calls. Its methods
// are safe for concurrent use.
type Session struct {
	task   *engine.Task
	opts   Options
	log    *slog.Logger
	bin    string
	dir    string
	sock   string
	port   int
	key    string // the dummy model key
	token  string // the channel's token
	ups    map[string]*upstream
	names  []string // the upstreams' names, sorted, for messages
	secret []string // every real credential, for the checks of Wrap

	srv     *http.Server
	served  chan struct{}
	closing sync.Once

	mu       sync.Mutex
	closed   bool
	inflight int
	idle     *sync.Cond // signalled when inflight drops to 0
}

// maxSocketPath is the longest path a unix socket may have on Linux.
const maxSocketPath = 107

// Open starts the session of task: the private directory, the socket and
// the server. ctx bounds the calls the session serves (the node's
// context); Close ends it.
func Open(ctx context.Context, task *engine.Task, opts Options) (*Session, error) {
	s := &Session{task: task, opts: opts, log: opts.Logger, served: make(chan struct{})}
	s.idle = sync.NewCond(&s.mu)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if s.bin, err = binary(opts.Binary); err != nil {
		return nil, err
	}
	ups := opts.Upstreams
	if ups == nil {
		ups = UpstreamsFromEnv(os.Getenv)
	}
	if s.ups, err = s.upstreams(ups); err != nil {
		return nil, err
	}
	if s.key, err = random("sk-iterion-"); err != nil {
		return nil, err
	}
	if s.token, err = random(""); err != nil {
		return nil, err
	}
	if s.port, err = freePort(); err != nil {
		return nil, err
	}
	s.dir, err = os.MkdirTemp(opts.Dir, "iterion-ch-")
	if err != nil {
		return nil, fmt.Errorf("creating the run channel's directory: %w", err)
	}
	if real, err := filepath.EvalSymlinks(s.dir); err == nil {
		s.dir = real // the path the sandbox binds
	}
	s.sock = filepath.Join(s.dir, "s")
	if len(s.sock) > maxSocketPath {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("the run channel's socket %s is longer than a unix socket path may be (%d bytes): choose a shorter directory for it", s.sock, maxSocketPath)
	}
	ln, err := net.Listen("unix", s.sock)
	if err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("listening on the run channel's socket: %w", err)
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // ends with Close
		stop()
		cancel()
	}()
	return s, nil
}

// Close stops the session: the server, the calls in flight (their context
// ends, and Close waits for their handlers), then the directory. Safe to
// call more than once.
func (s *Session) Close() error {
	var err error
	s.closing.Do(func() {
		err = s.srv.Close()
		<-s.served // and so the calls' context has ended
		s.mu.Lock()
		s.closed = true
		for s.inflight > 0 {
			s.idle.Wait()
		}
		s.mu.Unlock()
		if rerr := os.RemoveAll(s.dir); err == nil {
			err = rerr
		}
	})
	return err
}

// Key is the session's dummy model key: the key the CLI presents to the
// proxy, for every provider. It is worthless outside this session.
func (s *Session) Key() string { return s.key }

// BaseURL is the URL the CLI inside the sandbox uses for provider name,
// as in pi's models.json; "" when the session has no such upstream.
func (s *Session) BaseURL(name string) string {
	if s.ups[name] == nil {
		return ""
	}
	return "http://" + s.listenAddr() + "/model/" + name
}

// Binary is the iterion executable as the sandbox sees it (Wrap mounts
// it at the same path), for the commands the CLI starts itself: `Binary()
// mcp-ask-user`.
func (s *Session) Binary() string { return s.bin }

// Socket is the path of the session's socket, the same inside and out.
func (s *Session) Socket() string { return s.sock }

// ChannelEnv is what a command inside the sandbox needs to reach the
// node's interaction calls (Client): the socket, the token, the run and
// the node.
func (s *Session) ChannelEnv() []string {
	return []string{EnvChannel + "=" + s.sock, EnvToken + "=" + s.token, EnvRun + "=" + s.task.RunID, EnvNode + "=" + s.task.NodeID}
}

// Env is what Wrap adds to the CLI's environment: the dummy key and the
// base URL of anthropic and openai, under the variables their SDKs read
// (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, OPENAI_API_KEY,
// OPENAI_BASE_URL), and ChannelEnv.
func (s *Session) Env() []string {
	var env []string
	if s.ups[Anthropic] != nil {
		env = append(env, "ANTHROPIC_API_KEY="+s.key, "ANTHROPIC_BASE_URL="+s.BaseURL(Anthropic))
	}
	if s.ups[OpenAI] != nil {
		env = append(env, "OPENAI_API_KEY="+s.key, "OPENAI_BASE_URL="+s.BaseURL(OpenAI))
	}
	return append(env, s.ChannelEnv()...)
}

// ExecCommand is the name of the subcommand Wrap runs the CLI under.
const ExecCommand = "sandbox-exec"

// Wrap returns p made to run with the session: its command runs under
// `iterion sandbox-exec`, forwarding the sandbox's 127.0.0.1:PORT to the
// session's socket; the iterion binary and the session's directory are
// mounted read-only; Env is added to its environment, after p's (so it
// wins); its network is model-only unless p asks for another. p is not
// changed. Wrap refuses a p whose environment holds a provider's real key.
func (s *Session) Wrap(p *engine.Process) (*engine.Process, error) {
	if len(p.Argv) == 0 {
		return nil, errors.New("wrapping a process for the run channel: it has no command")
	}
	for _, kv := range p.Env {
		for _, sec := range s.secret {
			if strings.Contains(kv, sec) {
				name, _, _ := strings.Cut(kv, "=")
				return nil, fmt.Errorf("the environment of %s holds a provider's real key (in %s): keys stay outside the sandbox, where the run channel's proxy adds them; give the CLI the session's Env instead", p.Argv[0], name)
			}
		}
	}
	q := *p
	q.Argv = append([]string{s.bin, ExecCommand, "--forward", s.listenAddr() + "=" + s.sock, "--"}, p.Argv...)
	q.Mounts = append(slices.Clip(p.Mounts), engine.Mount{Source: s.bin}, engine.Mount{Source: s.dir})
	q.Env = append(slices.Clip(p.Env), s.Env()...)
	if q.Network == engine.NetworkDefault {
		q.Network = engine.NetworkModelOnly
	}
	return &q, nil
}

func (s *Session) listenAddr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// ServeHTTP routes the session's requests: the model proxy and the
// channel, nothing else.
func (s *Session) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		refuse(w, http.StatusServiceUnavailable, "api_error", "the run channel is closed: the node's execution ended")
		return
	}
	defer s.leave()
	switch {
	case r.Method == http.MethodConnect || r.URL.Host != "":
		// An absolute request line or CONNECT: someone using the proxy as
		// a general one.
		refuse(w, http.StatusForbidden, "permission_error", fmt.Sprintf(
			"iterion's model proxy is not a general proxy: it forwards only to the run's model providers (%s), at their configured base URLs; send requests to the base URL it gave you", strings.Join(s.names, ", ")))
	case strings.HasPrefix(r.URL.Path, "/model/"):
		s.serveModel(w, r)
	case strings.HasPrefix(r.URL.Path, channelPrefix):
		s.serveChannel(w, r)
	default:
		refuse(w, http.StatusForbidden, "permission_error", fmt.Sprintf(
			"iterion's model proxy forwards only to the run's model providers (%s) under /model/<provider>/: %s is not one of their paths", strings.Join(s.names, ", "), clip(r.URL.Path, 200)))
	}
}

// enter counts a request in, unless the session is closed.
func (s *Session) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.inflight++
	return true
}

func (s *Session) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight--; s.inflight == 0 {
		s.idle.Broadcast()
	}
}

// binary resolves the iterion executable the sandbox runs.
func binary(path string) (string, error) {
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("finding the iterion binary to run in the sandbox: %w", err)
		}
		path = exe
	}
	if strings.HasSuffix(path, " (deleted)") {
		return "", fmt.Errorf("the iterion binary %s was removed or replaced since it started: restart iterion", strings.TrimSuffix(path, " (deleted)"))
	}
	abs, err := filepath.Abs(path)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("the iterion binary to run in the sandbox: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("the iterion binary %s is not an executable file, so the sandbox cannot run it", abs)
	}
	return abs, nil
}

// random returns prefix and 32 random hex digits.
func random(prefix string) (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("making the run channel's key: %w", err)
	}
	return prefix + hex.EncodeToString(b[:]), nil
}

// freePort picks the port the forwarder listens on inside the sandbox. Any
// port would do in the sandbox's own network namespace; one free on the
// host's loopback too keeps the host driver (which shares the host's)
// from meeting another listener there.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("choosing the model proxy's port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
