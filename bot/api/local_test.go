package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/engine"
)

// ok is a handler that names its caller.
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	c, _ := api.CallerFrom(r.Context())
	_, _ = w.Write([]byte(c.Name + " via " + c.Via))
})

func mustServeLocal(tb testing.TB, storeDir string, opts api.LocalOptions) *api.LocalServer {
	tb.Helper()
	s, err := api.ServeLocal(storeDir, ok, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestServeLocalFiles(t *testing.T) {
	storeDir := t.TempDir()
	opts := api.LocalOptions{Dir: newRuntimeDir(t)}
	s := mustServeLocal(t, storeDir, opts)
	ep := s.Endpoint
	dirInfo, err := os.Stat(ep.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := dirInfo.Mode().Perm(); got != 0o700 {
		t.Errorf("private directory mode = %04o, want 0700", got)
	}
	tokInfo, err := os.Lstat(ep.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if !tokInfo.Mode().IsRegular() || tokInfo.Mode().Perm() != 0o600 {
		t.Errorf("token file mode = %v, want a regular file 0600", tokInfo.Mode())
	}
	sockInfo, err := os.Lstat(ep.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if sockInfo.Mode()&os.ModeSocket == 0 || sockInfo.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want a socket 0600", sockInfo.Mode())
	}
	first, _ := os.ReadFile(ep.TokenFile)
	if len(first) != 43 { // 32 bytes, base64url without padding
		t.Errorf("token is %d characters, want 43", len(first))
	}
	if filepath.Dir(ep.Socket) != ep.Dir || filepath.Dir(ep.TokenFile) != ep.Dir || strings.HasPrefix(ep.Socket, storeDir) {
		t.Errorf("endpoint %+v: want the socket and token in the private directory, outside the store", ep)
	}
	entries, _ := os.ReadDir(ep.Dir)
	if len(entries) != 2 {
		t.Errorf("private directory holds %d files, want the socket and the token (no temp file left)", len(entries))
	}

	// Through a symlink or a relative path, the store is the same.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(storeDir, link); err != nil {
		t.Fatal(err)
	}
	if ep2, err := api.LocalEndpoint(link, opts); err != nil || ep2 != ep {
		t.Errorf("endpoint through a symlink = %+v, %v; want %+v", ep2, err, ep)
	}
	// Another store has another socket.
	if ep3, err := api.LocalEndpoint(t.TempDir(), opts); err != nil || ep3.Socket == ep.Socket || ep3.TokenFile == ep.TokenFile {
		t.Errorf("another store's endpoint = %+v, %v", ep3, err)
	}

	// A new owner writes a new token; closing removes both files.
	s.Close()
	for _, p := range []string{ep.Socket, ep.TokenFile} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Close: %v, want it removed", p, err)
		}
	}
	s2 := mustServeLocal(t, storeDir, opts)
	second, _ := os.ReadFile(s2.Endpoint.TokenFile)
	if string(second) == string(first) {
		t.Error("a new owner reused the previous token")
	}
	c, err := api.DialLocal(storeDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Runs(context.Background(), engine.RunFilter{}); err == nil || !strings.Contains(err.Error(), "decoding") {
		// ok answers text, not JSON: getting that far means the token was taken.
		t.Errorf("runs through the local socket: %v, want the handler reached", err)
	}
}

// The private directory is refused unless it is ours and nobody else can
// write to it or swap it.
func TestPrivateDirRefused(t *testing.T) {
	storeDir := t.TempDir()
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		root    bool // needs root (chown)
		wantErr string
	}{
		{"world-writable", func(t *testing.T, dir string) { mustMkdir(t, dir, 0o777) }, false, "is writable by other users (mode 0777): run chmod 700 "},
		{"group-writable", func(t *testing.T, dir string) { mustMkdir(t, dir, 0o770) }, false, "is writable by other users (mode 0770)"},
		{"a file", func(t *testing.T, dir string) {
			mustMkdir(t, filepath.Dir(dir), 0o700)
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false, "is not a directory"},
		{"parent writable by others", func(t *testing.T, dir string) {
			mustMkdir(t, filepath.Dir(dir), 0o777)
		}, false, "which other users can write to (mode 0777): run chmod go-w "},
		{"another user's", func(t *testing.T, dir string) {
			mustMkdir(t, dir, 0o700)
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, true, "belongs to uid 65534, not to us"},
		{"inside another user's", func(t *testing.T, dir string) {
			mustMkdir(t, filepath.Dir(dir), 0o755)
			if err := os.Chown(filepath.Dir(dir), 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, true, "which belongs to uid 65534"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Getuid() != 0 {
				t.Fatal("this case gives a directory to another user, which needs root: run the suite as root, as make test and CI do")
			}
			base, err := os.MkdirTemp("", "itapi")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(base) })
			dir := filepath.Join(base, "parent", "run")
			mustMkdir(t, filepath.Dir(filepath.Dir(dir)), 0o700)
			tc.setup(t, dir)
			_, err = api.ServeLocal(storeDir, ok, api.LocalOptions{Dir: dir})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), base) {
				t.Errorf("err = %v, want one naming the path and containing %q", err, tc.wantErr)
			}
			if _, err := api.DialLocal(storeDir, api.LocalOptions{Dir: dir}); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("client: err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func mustMkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func TestSocketPathTooLong(t *testing.T) {
	dir := filepath.Join(newRuntimeDir(t), strings.Repeat("d", 90))
	_, err := api.ServeLocal(t.TempDir(), ok, api.LocalOptions{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "over the 103 a unix socket allows: set ITERION_RUNTIME_DIR to a shorter") {
		t.Errorf("err = %v", err)
	}
}

// The default directory is $XDG_RUNTIME_DIR/iterion when that is ours and
// private, else the user cache directory's iterion/run.
func TestDefaultDir(t *testing.T) {
	base, err := os.MkdirTemp("", "itapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	xdg := filepath.Join(base, "xdg")
	cache := filepath.Join(base, "cache")
	storeDir := t.TempDir()
	tests := []struct {
		name    string
		xdg     string
		xdgMode os.FileMode
		want    string
	}{
		{"private runtime dir", xdg, 0o700, filepath.Join(xdg, "iterion")},
		{"runtime dir others can enter", xdg, 0o755, filepath.Join(cache, "iterion", "run")},
		{"runtime dir relative", "xdg", 0o700, filepath.Join(cache, "iterion", "run")},
		{"no runtime dir", "", 0, filepath.Join(cache, "iterion", "run")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.xdgMode != 0 {
				mustMkdir(t, xdg, tc.xdgMode)
			}
			t.Setenv("XDG_RUNTIME_DIR", tc.xdg)
			t.Setenv("XDG_CACHE_HOME", cache)
			ep, err := api.LocalEndpoint(storeDir, api.LocalOptions{})
			if err != nil || ep.Dir != tc.want {
				t.Errorf("Dir = %q, %v; want %q", ep.Dir, err, tc.want)
			}
		})
	}
}

// The client reads the token only from a file of ours that nobody else
// can read, and reports a store without an owner.
func TestDialLocal(t *testing.T) {
	storeDir := t.TempDir()
	opts := api.LocalOptions{Dir: newRuntimeDir(t)}
	if _, err := api.DialLocal(storeDir, opts); !errors.Is(err, api.ErrNoLocalOwner) {
		t.Errorf("no owner: err = %v, want ErrNoLocalOwner", err)
	}
	s := mustServeLocal(t, storeDir, opts)
	tok := s.Endpoint.TokenFile
	if err := os.Chmod(tok, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := api.DialLocal(storeDir, opts); err == nil || !strings.Contains(err.Error(), "can be read by other users (mode 0644)") {
		t.Errorf("token readable by others: err = %v", err)
	}
	if err := os.Rename(tok, tok+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tok+".real", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tok+".real", tok); err != nil {
		t.Fatal(err)
	}
	if _, err := api.DialLocal(storeDir, opts); err == nil || !strings.Contains(err.Error(), "reading the local API's token") {
		t.Errorf("token behind a symlink: err = %v, want it refused", err)
	}
}

// The socket's user, and only with the token, gets through; the handler
// sees them by their OS user name via cli.
func TestLocalCaller(t *testing.T) {
	storeDir := t.TempDir()
	opts := api.LocalOptions{Dir: newRuntimeDir(t)}
	s := mustServeLocal(t, storeDir, opts)
	token, err := os.ReadFile(s.Endpoint.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int32
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "unix", s.Endpoint.Socket)
	}}}
	for _, tc := range []struct {
		auth     string
		wantCode int
		wantBody string
	}{
		{"Bearer " + string(token), 200, api.UserName(os.Getuid()) + " via cli"},
		{"", 401, "missing token: the request has no Authorization header (send Authorization: Bearer <the token in " + s.Endpoint.TokenFile + ">)"},
		{"Bearer nope", 401, "wrong token"},
	} {
		req, _ := http.NewRequest("GET", "http://owner/api/runs", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var eb struct{ Error string }
		if json.Unmarshal(b, &eb) == nil && eb.Error != "" {
			b = []byte(eb.Error)
		}
		if resp.StatusCode != tc.wantCode || !strings.Contains(string(b), tc.wantBody) {
			t.Errorf("Authorization %q: %d %s, want %d %q", tc.auth, resp.StatusCode, b, tc.wantCode, tc.wantBody)
		}
	}
	if dials.Load() == 0 {
		t.Error("no request reached the socket")
	}
}
