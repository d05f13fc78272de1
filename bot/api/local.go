package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The local API is how other iterion commands of the same user reach a
// store's owner. Three things keep it to them:
//
//   - The socket and the token file live in a private directory of the
//     owner's user, never under /tmp with a predictable name and never in
//     the store directory (whose workspaces/ a run's sandbox mounts). The
//     directory is created 0700 and refused when another user owns it or
//     can write to it or to one of its parents.
//   - Every request carries the owner's token, a fresh random one per
//     owner written 0600 next to the socket, as "Authorization: Bearer".
//   - On Linux the peer's uid (SO_PEERCRED) must be the owner's. Root is
//     not let in either: run the command as the owner's user.
//
// The store directory's owner.json says which process owns the store; it
// never says where the socket is, so a hostile owner.json cannot send a
// client's token to another socket.

// LocalOptions say where the local API lives. The zero value means the
// defaults.
type LocalOptions struct {
	// Dir is the private directory holding the sockets and tokens of every
	// store of this user (cmd/iterion sets it from $ITERION_RUNTIME_DIR).
	// Empty means the first of these whose socket paths fit the ~100
	// bytes a unix socket allows: $XDG_RUNTIME_DIR/iterion, when
	// XDG_RUNTIME_DIR is set, ours and private (0700), then
	// os.UserCacheDir()/iterion/run (~/.cache/iterion/run on Linux).
	Dir string
}

// Endpoint is where a store's owner serves the local API.
type Endpoint struct {
	// Dir is the private directory, symlinks resolved.
	Dir string
	// Socket is the unix socket, Dir/<store id>.sock, where <store id> is
	// a hash of the store directory's absolute, symlink-free path.
	Socket string
	// TokenFile holds the owner's token, Dir/<store id>.token, mode 0600.
	TokenFile string
}

// maxSocketPath is the longest unix socket path accepted everywhere
// (sun_path is 108 bytes on Linux and 104 on macOS, with a NUL).
const maxSocketPath = 103

// storeIDLen is the length of the store id in socket and token names.
const storeIDLen = 16

// LocalEndpoint returns where storeDir's owner serves the local API. It
// creates the private directory (0700) when missing and checks that it,
// and every directory above it, is safe from other users. The errors name
// the path and what to fix.
func LocalEndpoint(storeDir string, opts LocalOptions) (Endpoint, error) {
	id := storeID(storeDir)
	name := id + ".sock"
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = defaultDir(len(name)); err != nil {
			return Endpoint{}, err
		}
	}
	dir, err := privateDir(dir)
	if err != nil {
		return Endpoint{}, err
	}
	ep := Endpoint{Dir: dir, Socket: filepath.Join(dir, name), TokenFile: filepath.Join(dir, id+".token")}
	if len(ep.Socket) > maxSocketPath {
		return Endpoint{}, fmt.Errorf("the local API's socket %s is %d bytes long, over the %d a unix socket allows: set ITERION_RUNTIME_DIR to a shorter private directory", ep.Socket, len(ep.Socket), maxSocketPath)
	}
	return ep, nil
}

// storeID names a store in the private directory: the same store gets
// the same id whichever path (relative, through a symlink) reaches it.
func storeID(storeDir string) string {
	p, err := filepath.Abs(storeDir)
	if err != nil {
		p = storeDir
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	sum := sha256.Sum256([]byte(p))
	return hex.EncodeToString(sum[:])[:storeIDLen]
}

// defaultDir picks the default private directory for a socket file name
// of nameLen bytes.
func defaultDir(nameLen int) (string, error) {
	var tried []string
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" && filepath.IsAbs(x) && ownedPrivate(x) {
		tried = append(tried, filepath.Join(x, "iterion"))
	}
	if c, err := os.UserCacheDir(); err == nil {
		tried = append(tried, filepath.Join(c, "iterion", "run"))
	}
	if len(tried) == 0 {
		return "", errors.New("no private directory for the local API: set XDG_RUNTIME_DIR, HOME or ITERION_RUNTIME_DIR")
	}
	for _, d := range tried {
		if len(d)+1+nameLen <= maxSocketPath {
			return d, nil
		}
	}
	return "", fmt.Errorf("no private directory for the local API is short enough for a unix socket (%s): set ITERION_RUNTIME_DIR to a shorter one", strings.Join(tried, ", "))
}

// ownedPrivate reports whether dir is a directory of ours that nobody
// else can enter, as XDG_RUNTIME_DIR should be.
func ownedPrivate(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid() && fi.Mode().Perm()&0o077 == 0
}

// privateDir creates dir (0700) when missing and returns it with symlinks
// resolved, after checking that we own it, that no other user can write
// to it, and that each directory above it belongs to us or root and is
// either not writable by others or sticky (like /tmp), so nobody else can
// swap it for theirs.
func privateDir(dir string) (string, error) {
	if !filepath.IsAbs(dir) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("private directory %s: %w", dir, err)
		}
		dir = abs
	}
	if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() && fi.Mode()&os.ModeSymlink == 0 {
		return "", fmt.Errorf("private directory %s is not a directory: remove it, or set ITERION_RUNTIME_DIR to another directory", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the private directory %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("private directory %s: %w", dir, err)
	}
	uid := os.Getuid()
	fi, err := os.Lstat(real)
	if err != nil {
		return "", fmt.Errorf("private directory %s: %w", real, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return "", fmt.Errorf("private directory %s is not a directory: remove it, or set ITERION_RUNTIME_DIR to another directory", real)
	case !ok || int(st.Uid) != uid:
		return "", fmt.Errorf("private directory %s belongs to uid %d, not to us (uid %d): someone else may have created it first; remove it, or set ITERION_RUNTIME_DIR to a directory of ours", real, ownerUID(st), uid)
	case fi.Mode().Perm()&0o022 != 0:
		return "", fmt.Errorf("private directory %s is writable by other users (mode %04o): run chmod 700 %s", real, fi.Mode().Perm(), real)
	}
	for p := filepath.Dir(real); ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("private directory %s: %w", real, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || (int(st.Uid) != uid && st.Uid != 0) {
			return "", fmt.Errorf("private directory %s is inside %s, which belongs to uid %d: set ITERION_RUNTIME_DIR to a directory under one of ours", real, p, ownerUID(st))
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
			return "", fmt.Errorf("private directory %s is inside %s, which other users can write to (mode %04o): run chmod go-w %s, or set ITERION_RUNTIME_DIR to another directory", real, p, fi.Mode().Perm(), p)
		}
		if p == filepath.Dir(p) {
			return real, nil
		}
	}
}

func ownerUID(st *syscall.Stat_t) int {
	if st == nil {
		return -1
	}
	return int(st.Uid)
}

// LocalServer serves the API on a store's socket to its owner's user.
type LocalServer struct {
	// Endpoint is where it listens and where its token is.
	Endpoint Endpoint
	ln       net.Listener
	srv      *http.Server
}

// ServeLocal serves h on storeDir's socket in the background. It writes a
// fresh token first; each request must then come from a process of our
// uid (checked with SO_PEERCRED on Linux) and carry "Authorization:
// Bearer <token>", and h sees it with the Caller {Name: the peer's user
// name, Via: "cli"}. Only the process holding the store may call it: it
// replaces a previous owner's socket and token.
func ServeLocal(storeDir string, h http.Handler, opts LocalOptions) (*LocalServer, error) {
	ep, err := LocalEndpoint(storeDir, opts)
	if err != nil {
		return nil, err
	}
	token, err := writeToken(ep.TokenFile)
	if err != nil {
		return nil, err
	}
	_ = os.Remove(ep.Socket) // a dead owner's; the caller holds the store
	ln, err := net.Listen("unix", ep.Socket)
	if err != nil {
		_ = os.Remove(ep.TokenFile)
		return nil, fmt.Errorf("listening on %s: %w", ep.Socket, err)
	}
	// The directory already keeps others out; the mode is a second lock.
	if err := os.Chmod(ep.Socket, 0o600); err != nil {
		ln.Close()
		_ = os.Remove(ep.TokenFile)
		return nil, fmt.Errorf("securing %s: %w", ep.Socket, err)
	}
	s := &LocalServer{Endpoint: ep, ln: ln}
	s.srv = &http.Server{
		Handler:           localAuth(h, localGuard{uid: os.Getuid(), token: token, tokenFile: ep.TokenFile}),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			uid, err := peerUID(c)
			return context.WithValue(ctx, peerKey{}, peer{uid: uid, err: err})
		},
	}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops serving and removes the socket and the token file.
func (s *LocalServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	_ = os.Remove(s.Endpoint.Socket)
	_ = os.Remove(s.Endpoint.TokenFile)
	return err
}

// tokenBytes is the token's entropy.
const tokenBytes = 32

// writeToken writes a fresh random token to path, mode 0600, atomically:
// a client never reads half a token, and the file is never, even for a
// moment, readable by others.
func writeToken(path string) (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making the local API's token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(b)
	// CreateTemp opens with O_EXCL and mode 0600.
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return "", fmt.Errorf("writing the local API's token: %w", err)
	}
	tmp := f.Name()
	_, err = io.WriteString(f, token)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("writing the local API's token to %s: %w", path, err)
	}
	return token, nil
}

// readToken reads the token at path, refusing a file that is not a
// regular file of ours readable by us alone (a symlink included).
func readToken(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", fmt.Errorf("reading the local API's token: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("reading the local API's token: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("the local API's token %s is not a regular file", path)
	case !ok || int(st.Uid) != os.Getuid():
		return "", fmt.Errorf("the local API's token %s belongs to uid %d, not to us (uid %d)", path, ownerUID(st), os.Getuid())
	case fi.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("the local API's token %s can be read by other users (mode %04o): restart the store's owner to write a fresh one", path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, 1024))
	if err != nil {
		return "", fmt.Errorf("reading the local API's token %s: %w", path, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("the local API's token %s is empty", path)
	}
	return token, nil
}

// ErrNoLocalOwner means nobody serves the local API of a store.
var ErrNoLocalOwner = errors.New("no owner serves this store's local API")

// DialLocal returns a client of storeDir's owner over its socket, with
// the owner's token. The socket is always the one in our private
// directory, found from storeDir, never a path someone else recorded. It
// returns an error wrapping ErrNoLocalOwner when there is no socket.
func DialLocal(storeDir string, opts LocalOptions) (*Client, error) {
	ep, err := LocalEndpoint(storeDir, opts)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(ep.Socket)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (no socket at %s)", ErrNoLocalOwner, ep.Socket)
	}
	if err != nil {
		return nil, fmt.Errorf("the local API's socket: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); fi.Mode()&os.ModeSocket == 0 || !ok || int(st.Uid) != os.Getuid() {
		return nil, fmt.Errorf("%s is not a socket of ours: remove it", ep.Socket)
	}
	token, err := readToken(ep.TokenFile)
	if err != nil {
		return nil, err
	}
	return NewUnixClient(ep.Socket, token), nil
}
