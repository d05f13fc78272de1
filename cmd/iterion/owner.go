package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// ownerFile, in the store directory, records the process that owns the
// store. It does not say where the owner's API is: clients find the socket
// in their own private directory (see localOptions), so an owner.json
// written by someone else cannot lead them, and their token, elsewhere.
const ownerFile = "owner.json"

type ownerInfo struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
}

// storeDir resolves the store directory: the flag, then ITERION_STORE,
// then .iterion, from the App's directory.
func (a *App) storeDir(flag string) string {
	return a.path(cmp.Or(flag, a.getenv("ITERION_STORE"), defaultStoreDir))
}

// localOptions say where the store owners' sockets and tokens are: the
// private directory $ITERION_RUNTIME_DIR, else api.LocalOptions' default
// ($XDG_RUNTIME_DIR/iterion, else ~/.cache/iterion/run). Owners and the
// commands that reach them must agree, so give them the same environment.
func (a *App) localOptions() api.LocalOptions {
	return api.LocalOptions{Dir: a.path(a.getenv("ITERION_RUNTIME_DIR"))}
}

// owner is this process holding a store: the database, the engine over
// it, and the API served on the store's socket.
type owner struct {
	dir    string
	local  api.LocalOptions
	db     *store.DB
	engine *engine.Engine
	served *api.LocalServer
	api    *api.Server
	// apiHandler is the API, also mounted by serve on TCP behind a token.
	apiHandler http.Handler
	// schedules, set before start (serve), serves /api/schedules.
	schedules api.Schedules
	// place, when set before start, says where a run belongs for the API's
	// repo filters (serve: a GitHub run's repository).
	place func(*engine.Run) api.Place

	closing  sync.Once
	closeErr error
}

// becomeOwner opens the store directory for this process, builds the
// engine over it with opts and serves its API; the App's Close releases
// them. A second owner gets an error naming the first.
func (a *App) becomeOwner(dir, command string, opts engine.Options, notices io.Writer) (*owner, error) {
	o, err := a.openOwner(dir, command, notices, opts.Logger)
	if err != nil {
		return nil, err
	}
	if err := o.start(opts, nil); err != nil {
		return nil, err
	}
	return o, nil
}

// openStore opens the store in dir. A short-lived command (runs list,
// runs answer) may hold it for a moment when no owner is alive, and so may
// a process this one is starting, between its fork and its exec (the copy
// of the lock's descriptor it holds until then keeps the lock): it waits
// for them, up to 5 s, rather than fail. A live owner's store is refused
// at once.
func openStore(dir string, opts store.Options) (*store.DB, error) {
	db, err := store.Open(dir, opts)
	for wait := 0; errors.Is(err, store.ErrLocked) && wait < 50; wait++ {
		if info, ok := readOwner(dir); ok && alive(info.PID) {
			break // a real owner: no point waiting
		}
		time.Sleep(100 * time.Millisecond)
		db, err = store.Open(dir, opts)
	}
	return db, err
}

// openOwner takes the store directory for this process, until the App's
// Close: the store is open, nothing runs and no API is served until start.
// The store's notices (a migration, its backup) go to log; nil drops them.
func (a *App) openOwner(dir, command string, notices io.Writer, log *slog.Logger) (*owner, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating store directory %s: %w", dir, err)
	}
	db, err := openStore(dir, store.Options{Logger: log})
	if errors.Is(err, store.ErrLocked) {
		if info, ok := readOwner(dir); ok {
			return nil, fmt.Errorf("store %s is in use by another iterion process (pid %d, %q, since %s); wait for it, or use another --store-dir", dir, info.PID, info.Command, info.Since.Format(time.RFC3339))
		}
		return nil, fmt.Errorf("store %s is in use by another iterion process; wait for it, or use another --store-dir", dir)
	}
	if err != nil {
		return nil, err // names the directory
	}
	o := &owner{dir: dir, db: db, local: a.localOptions()}
	a.hold(func() { o.Close() })
	noteInterrupted(db, notices)
	info := ownerInfo{PID: os.Getpid(), Command: command, Since: time.Now().UTC()}
	b, _ := json.Marshal(info)
	if err := os.WriteFile(filepath.Join(dir, ownerFile), b, 0o600); err != nil {
		return nil, fmt.Errorf("recording the owner of %s: %w", dir, err)
	}
	return o, nil
}

// start builds the engine over the store and serves the API on the
// store's socket, with launch for POST /api/runs (nil: no such route).
func (o *owner) start(opts engine.Options, launch func(context.Context, api.LaunchRequest) (*engine.Run, error)) error {
	opts.Store = o.db
	o.engine = engine.New(opts)
	o.api = api.NewServer(o.engine, o.db, api.Options{Logger: opts.Logger, Launch: launch, Redactor: opts.Redactor, Schedules: o.schedules, Backup: o.db.Backup, Place: o.place})
	o.apiHandler = o.api.Handler()
	// We hold the store, so a socket and token already there are a dead
	// owner's: ServeLocal replaces them.
	var err error
	if o.served, err = api.ServeLocal(o.dir, o.apiHandler, o.local); err != nil {
		return fmt.Errorf("serving the API of store %s: %w", o.dir, err)
	}
	return nil
}

// Close stops the API (ending the waits of its clients first) and the
// engine's timers, and closes the store. It may be called more than once.
func (o *owner) Close() error {
	o.closing.Do(func() {
		if o.api != nil {
			o.api.Close()
		}
		if o.served != nil {
			_ = o.served.Close()
		}
		if o.engine != nil {
			o.engine.Close()
		}
		_ = os.Remove(filepath.Join(o.dir, ownerFile))
		o.closeErr = o.db.Close()
	})
	return o.closeErr
}

// noteInterrupted tells about runs still marked running: this process now
// holds the store, so their owner died mid-run. They continue from their
// checkpoint (the interrupted node runs again) with iterion resume.
func noteInterrupted(db *store.DB, out io.Writer) {
	runs, err := db.Runs(context.Background(), engine.RunFilter{Status: engine.StatusRunning})
	if err != nil {
		return
	}
	for _, r := range runs {
		fmt.Fprintf(out, "note: run %s was interrupted (its process stopped mid-run); continue it with: iterion resume --run-id %s\n", r.ID, r.ID)
	}
}

func readOwner(dir string) (ownerInfo, bool) {
	var info ownerInfo
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil || json.Unmarshal(b, &info) != nil || info.PID <= 0 {
		return info, false
	}
	return info, true
}

// alive reports whether a process with pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// storeAccess is how a CLI command reaches a store: through its live
// owner's API, or by opening it directly when nobody owns it.
type storeAccess struct {
	client *api.Client // set when an owner is alive
	db     *store.DB   // set when this process opened the store
}

// access connects to the store's owner, or opens the store when there is
// no live owner.
//
// The owner is always reached on the socket of our private directory, with
// the token there; owner.json only says whether an owner is alive.
func (a *App) access(ctx context.Context, dir string, log *slog.Logger) (*storeAccess, error) {
	var apiErr error // why a live owner's API did not answer
	if info, ok := readOwner(dir); ok && alive(info.PID) {
		c, err := api.DialLocal(dir, a.localOptions())
		if err == nil {
			_, err = c.Runs(ctx, engine.RunFilter{Limit: 1})
		}
		if err == nil {
			return &storeAccess{client: c}, nil
		}
		apiErr = err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("no iterion store at %s (start a run with iterion run, or pass --store-dir)", dir)
	}
	db, err := openStore(dir, store.Options{Logger: log})
	if err != nil && apiErr != nil {
		// Typically a different ITERION_RUNTIME_DIR or XDG_RUNTIME_DIR
		// than the owner's, or an owner of another user.
		return nil, fmt.Errorf("%w; its owner's API did not answer either: %v", err, apiErr)
	}
	if err != nil {
		return nil, err // names the directory and, when locked, its owner
	}
	sa := &storeAccess{db: db}
	a.hold(sa.Close)
	return sa, nil
}

func (a *storeAccess) Close() {
	if a.db != nil {
		a.db.Close()
		a.db = nil
	}
}
