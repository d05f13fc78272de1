package nodesandbox_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/internal/nodesandbox/nodesandboxtest"
	"github.com/iterion-bot/iterion/sandbox"
)

func compile(t *testing.T, src string) *dsl.Workflow {
	t.Helper()
	w, ds := dsl.CompileSource("t.bot", []byte(src))
	if ds.HasErrors() {
		t.Fatalf("%s", dsl.RenderString(ds, map[string][]byte{"t.bot": []byte(src)}))
	}
	return w
}

// tool is a one-node workflow whose tool has the sandbox: block decl.
func tool(t *testing.T, decl string) (*dsl.Workflow, *dsl.Node) {
	t.Helper()
	w := compile(t, "tool t:\n  command: \"true\"\n"+decl+"workflow w:\n  entry: t\n  t -> done\n")
	return w, w.Node("t")
}

func run(t *testing.T, sb *nodesandbox.Sandboxes, w *dsl.Workflow, n *dsl.Node, script string) (*engine.ProcessResult, error) {
	t.Helper()
	return sb.Run(context.Background(), &engine.Process{Workflow: w, Node: n, Argv: []string{"bash", "-c", script}, Dir: t.TempDir()})
}

// The driver of a node: the server's, or the one its sandbox: names; the
// host only where the operator allows it; docker only with an image.
func TestDriverChoice(t *testing.T) {
	strict := nodesandboxtest.New(t, nodesandbox.Options{})
	lenient := nodesandboxtest.New(t, nodesandbox.Options{AllowHost: true})
	tests := []struct {
		name    string
		sb      *nodesandbox.Sandboxes
		decl    string
		wantErr string // "" means it runs, isolated (uid 1000)
		wantUID string
	}{
		{name: "server default", sb: strict, wantUID: "1000"},
		{name: "auto", sb: strict, decl: "  sandbox: auto\n", wantUID: "1000"},
		{name: "bwrap", sb: strict, decl: "  sandbox: bwrap\n", wantUID: "1000"},
		{name: "host refused", sb: strict, decl: "  sandbox: none\n", wantErr: "which this server does not allow: remove it, or let the operator set sandbox.allow_host: true"},
		{name: "host allowed", sb: lenient, decl: "  sandbox: none\n", wantUID: strconv.Itoa(os.Getuid())},
		{name: "docker without image", sb: strict, decl: "  sandbox: docker\n", wantErr: "no image: name one in the workflow"},
		{name: "docker image not listed", sb: strict, decl: "  sandbox:\n    image: \"golang:1.26\"\n", wantErr: `names the image "golang:1.26", which this server does not run`},
		{name: "network not allowed", sb: strict, decl: "  sandbox:\n    mode: auto\n    network: open\n", wantErr: "which this server does not allow: remove it, or let the operator set sandbox.allow_network: true"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, n := tool(t, tc.decl)
			res, err := run(t, tc.sb, w, n, "id -u")
			if tc.wantErr != "" {
				var ue *engine.UnavailableError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want an UnavailableError saying %q", err, tc.wantErr)
				}
				if perr := tc.sb.PreflightSandbox(w); perr == nil || !strings.Contains(perr.Error(), "node t: ") {
					t.Errorf("preflight = %v, want the same refusal naming the node", perr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(res.Stdout)); got != tc.wantUID {
				t.Errorf("uid = %s, want %s", got, tc.wantUID)
			}
		})
	}
}

// No network unless the node's sandbox: or the server opens it.
func TestNetworkPolicy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	probe := "(exec 3<>/dev/tcp/127.0.0.1/" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) + ") 2>/dev/null && echo reached || echo cut"
	closed := nodesandboxtest.New(t, nodesandbox.Options{AllowNetwork: true})
	open := nodesandboxtest.New(t, nodesandbox.Options{OpenNetwork: true})
	modelOnly := "  sandbox:\n    mode: auto\n    network: model_only\n"
	tests := []struct {
		name string
		sb   *nodesandbox.Sandboxes
		decl string
		// asks is the policy the process asks for (a CLI backend's
		// process asks for model-only).
		asks engine.Network
		want string
	}{
		{"default", closed, "", 0, "cut"},
		{"node opens where allowed", closed, "  sandbox:\n    mode: auto\n    network: open\n", 0, "reached"},
		{"server opens", open, "", 0, "reached"},
		{"node closes what the server opens", open, "  sandbox:\n    mode: auto\n    network: none\n", 0, "cut"},
		{"node declares model-only", open, modelOnly, 0, "cut"},
		{"process asks model-only", closed, "", engine.NetworkModelOnly, "cut"},
		{"process asks model-only, node opens", closed, "  sandbox:\n    mode: auto\n    network: open\n", engine.NetworkModelOnly, "reached"},
		{"process asks model-only, server opens", open, "", engine.NetworkModelOnly, "reached"},
		{"process and node model-only, server opens", open, modelOnly, engine.NetworkModelOnly, "cut"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, n := tool(t, tc.decl)
			res, err := tc.sb.Run(context.Background(), &engine.Process{Workflow: w, Node: n, Argv: []string{"bash", "-c", probe}, Dir: t.TempDir(), Network: tc.asks})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(res.Stdout)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// The environment is the allowlist, the node's literal env and what the
// engine passes: nothing else of the server's.
func TestEnvironment(t *testing.T) {
	t.Setenv("ITERION_API_TOKEN", "tok-server-secret")
	t.Setenv("ANTHROPIC_API_KEY", "sk-server-secret")
	t.Setenv("LANG", "C.UTF-8")
	sb := nodesandboxtest.New(t, nodesandbox.Options{})
	w, n := tool(t, "  sandbox:\n    mode: auto\n    env:\n      GOFLAGS: \"-mod=mod\"\n")
	res, err := sb.Run(context.Background(), &engine.Process{Workflow: w, Node: n, Argv: []string{"env"}, Dir: t.TempDir(), Env: []string{"ITERION_REF_1=value"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, kv := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	for _, want := range []string{"PATH", "HOME", "TMPDIR", "LANG", "GOFLAGS", "ITERION_REF_1"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("%s missing from the environment %v", want, names)
		}
	}
	if strings.Contains(string(res.Stdout), "server-secret") {
		t.Errorf("a server secret reached the sandbox:\n%s", res.Stdout)
	}
}

// A workspace holding the server's directories sees them empty,
// read-only; a home named inside the workspace is not used (the workspace
// would cover it), and the process gets a private one.
func TestHidesServerDirectories(t *testing.T) {
	project := t.TempDir()
	store := filepath.Join(project, ".iterion")
	if err := os.MkdirAll(filepath.Join(store, "homes"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "owner.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	sb := nodesandboxtest.New(t, nodesandbox.Options{Hide: []string{store}, HomeFor: func(string) string { return filepath.Join(store, "homes", "h") }})
	w, n := tool(t, "")
	// The workspace named directly, and through a symlink (iterion run's
	// current directory is $PWD, links and all).
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(project, link); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{project, link} {
		res, err := sb.Run(context.Background(), &engine.Process{Workflow: w, Node: n, Dir: dir,
			Argv: []string{"bash", "-c", "ls -A .iterion | wc -l; (touch .iterion/x) 2>/dev/null || echo refused; echo ok > $HOME/f && cat $HOME/f"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Fields(string(res.Stdout)); strings.Join(got, " ") != "0 refused ok" {
			t.Errorf("%s: got %q, want the store empty, not writable, and a working HOME (stderr %s)", dir, res.Stdout, res.Stderr)
		}
	}
	// The store itself, or a directory inside it, is no workspace.
	for _, dir := range []string{store, filepath.Join(store, "homes")} {
		_, err := sb.Run(context.Background(), &engine.Process{Workflow: w, Node: n, Dir: dir, Argv: []string{"true"}})
		var ue *engine.UnavailableError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "run the workflow from another directory") {
			t.Errorf("workspace %s: err = %v, want it refused", dir, err)
		}
	}
}

// The server's per-run workspaces lie inside its store, and are used.
func TestWorkspacesInsideTheStore(t *testing.T) {
	store := t.TempDir()
	ws := filepath.Join(store, "workspaces", "r-1")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "owner.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	sb := nodesandboxtest.New(t, nodesandbox.Options{Hide: []string{store}, Workspaces: filepath.Join(store, "workspaces")})
	w, n := tool(t, "")
	res, err := sb.Run(context.Background(), &engine.Process{Workflow: w, Node: n, Dir: ws, Argv: []string{"bash", "-c", "cat ../../owner.json 2>/dev/null || echo hidden"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "hidden" {
		t.Errorf("got %q, want the store outside the workspace unseen", got)
	}
}

// A workspace's home lasts from one process to the next.
func TestHomeForWorkspace(t *testing.T) {
	homes := t.TempDir()
	sb := nodesandboxtest.New(t, nodesandbox.Options{HomeFor: func(ws string) string { return filepath.Join(homes, filepath.Base(ws)+".home") }})
	w, n := tool(t, "")
	ws := t.TempDir()
	for i, script := range []string{"echo kept > $HOME/cache", "cat $HOME/cache"} {
		res, err := sb.Run(context.Background(), &engine.Process{Workflow: w, Node: n, Dir: ws, Argv: []string{"bash", "-c", script}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("process %d: %v %+v", i, err, res)
		}
		if i == 1 && strings.TrimSpace(string(res.Stdout)) != "kept" {
			t.Errorf("the second process read %q from HOME, want what the first wrote", res.Stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(homes, filepath.Base(ws)+".home", "cache")); err != nil {
		t.Errorf("the home is not where HomeFor put it: %v", err)
	}
}

// A mount that would show the server's own directories is refused, a
// symlink to them included.
func TestMountsOfServerDirectories(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(store, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "innocent")
	if err := os.Symlink(store, link); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{store, filepath.Dir(store), filepath.Join(store, "workspaces"), link} {
		_, err := nodesandbox.New(nodesandbox.Options{Hide: []string{store}, Mounts: []sandbox.Mount{{Source: src}}})
		if err == nil || !strings.Contains(err.Error(), "would show sandboxes the server's own directory "+store) {
			t.Errorf("mount %s: err = %v, want it refused", src, err)
		}
	}
	if _, err := nodesandbox.New(nodesandbox.Options{Hide: []string{store}, Mounts: []sandbox.Mount{{Source: t.TempDir()}}}); err != nil {
		t.Errorf("an unrelated mount: %v", err)
	}
}

// A backend's process gets its streams and its mounts: what it reads on
// stdin, what it writes reaches the writer as it goes, and a mount is
// read-only unless asked otherwise.
func TestStreamsAndMounts(t *testing.T) {
	sb := nodesandboxtest.New(t, nodesandbox.Options{})
	w, n := tool(t, "")
	shared := t.TempDir()
	if err := os.WriteFile(filepath.Join(shared, "asset"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	res, err := sb.Run(context.Background(), &engine.Process{
		Workflow: w, Node: n, Dir: t.TempDir(),
		Argv:   []string{"bash", "-c", "cat; cat /opt/shared/asset; echo x > /opt/shared/asset && echo wrote || echo refused"},
		Stdin:  strings.NewReader("from stdin\n"),
		Stdout: &out,
		Mounts: []engine.Mount{{Source: shared, Target: "/opt/shared"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "from stdin\nfrom the host\nrefused\n"; out.String() != want {
		t.Errorf("streamed stdout = %q, want %q", out.String(), want)
	}
	if len(res.Stdout) != 0 {
		t.Errorf("a streamed stdout is also kept in the result: %q", res.Stdout)
	}
}

// A read-only node's process reads its workspace and cannot change it.
func TestReadOnlyWorkspace(t *testing.T) {
	sb := nodesandboxtest.New(t, nodesandbox.Options{})
	w, n := tool(t, "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Run(context.Background(), &engine.Process{Workflow: w, Node: n, Dir: dir, ReadOnly: true,
		Argv: []string{"bash", "-c", "cat README; touch new 2>/dev/null && echo wrote || echo refused"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "hello\nrefused\n" {
		t.Errorf("stdout = %q, want the file read and the write refused", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Error("a read-only workspace was written")
	}
}
