package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/engine"
)

// roleEnv names, in a process the tests start, the role it plays instead
// of running the tests (see helperRoles); the tests whose process may die
// of what they test (a SIGBUS on a full disk) run it in such a process.
const roleEnv = "ITERION_STORE_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		play, ok := helperRoles[role]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown %s %q\n", roleEnv, role)
			os.Exit(2)
		}
		if err := play(os.Getenv("ITERION_STORE_TEST_DIR")); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helperRoles are what a helper process does with the store directory
// it is given. Each prints what the test checks on stdout.
var helperRoles = map[string]func(dir string) error{
	// fill writes runs with 200 KiB events until a write is refused, and
	// prints the refusal; with ITERION_STORE_TEST_CLOSE=0 it then exits
	// without closing the store, as a killed process would.
	"fill": func(dir string) error {
		db, err := Open(dir, helperOptions())
		if err != nil {
			return err
		}
		big := strings.Repeat("x", 200<<10)
		for i := 0; ; i++ {
			id := fmt.Sprintf("r-%04d", i)
			err := db.CreateRun(context.Background(), &engine.Run{ID: id, Status: engine.StatusRunning}, []engine.Event{{Type: engine.EventRunStarted}})
			if err == nil {
				err = db.Commit(context.Background(), engine.Change{RunID: id, Events: []engine.Event{{Type: engine.EventNodeFinished, Data: map[string]any{"output": big}}}})
			}
			if err != nil {
				if !errors.Is(err, engine.ErrStorageFull) {
					return fmt.Errorf("write %d: %w, want engine.ErrStorageFull", i, err)
				}
				fmt.Printf("written: %d\nrefused: %v\n", i, err)
				break
			}
		}
		if os.Getenv("ITERION_STORE_TEST_CLOSE") == "0" {
			os.Exit(0)
		}
		return db.Close()
	},
	// read opens the store, lists its runs, reads the events of the first,
	// tries a write and prints what each did.
	"read": func(dir string) error {
		db, err := Open(dir, helperOptions())
		if err != nil {
			fmt.Printf("open: %v\nopen full: %v\n", err, errors.Is(err, engine.ErrStorageFull))
			return nil
		}
		defer db.Close()
		fmt.Printf("open: ok\nread-only: %v\n", db.ReadOnly() != nil)
		runs, err := db.Runs(context.Background(), engine.RunFilter{})
		if err != nil {
			return err
		}
		fmt.Printf("runs: %d\n", len(runs))
		if len(runs) > 0 {
			evs, err := db.Events(context.Background(), runs[0].ID, 0, 0)
			if err != nil {
				return err
			}
			fmt.Printf("events: %d\n", len(evs))
		}
		err = db.CreateRun(context.Background(), &engine.Run{ID: "r-new"}, nil)
		fmt.Printf("write: %v\nwrite full: %v\n", err, errors.Is(err, engine.ErrStorageFull))
		return nil
	},
}

// helperOptions are the store options of a helper process: small memory,
// and the reserve in ITERION_STORE_TEST_RESERVE.
func helperOptions() Options {
	reserve, _ := strconv.ParseInt(os.Getenv("ITERION_STORE_TEST_RESERVE"), 10, 64)
	return Options{SmallMemory: true, DiskReserve: reserve, GCInterval: -1}
}
