// Package browsertest drives Debian's headless Chromium for the admin
// page's browser tests, with chromedp, and scans pages with axe-core.
// `make deps` installs both (Chromium with apt-get, axe-core from npm into
// the project's .tools/npm); a test that finds either missing fails with
// the command that installs it, and never skips.
package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// AxePackage is the axe-core that `make deps` installs, pinned.
const AxePackage = "axe-core@4.14.1"

// InstallChromium is the command that installs the browser.
const InstallChromium = "make deps-chromium (or, as root: apt-get install -y chromium)"

// FindChromium returns the path of Chromium: $ITERION_CHROMIUM when set,
// else Debian's chromium (or chromium-headless-shell) on the PATH.
func FindChromium() (string, error) {
	if p := os.Getenv("ITERION_CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("ITERION_CHROMIUM=%s: %w", p, err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-headless-shell", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("Chromium is not installed: run " + InstallChromium)
}

// New starts a headless Chromium of its own (a fresh profile in a
// temporary directory) for the test, and returns the context of its first
// tab; the browser stops when the test ends. The test fails, with the
// install command, when Chromium is missing.
func New(t testing.TB) context.Context {
	t.Helper()
	path, err := FindChromium()
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root here, where Chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first Run starts the browser, bound to the context it is given:
	// no timeout on it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium (%s): %v", path, err)
	}
	return ctx
}

// Tab opens another tab of the browser of ctx, sharing its cookies.
func Tab(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	return tab
}

// Violation is one rule axe found broken on a page.
type Violation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

func (v Violation) String() string {
	var where []string
	for _, n := range v.Nodes {
		where = append(where, n.HTML)
	}
	return fmt.Sprintf("%s (%s): %s\n    %s", v.ID, v.Impact, v.Help, strings.Join(where, "\n    "))
}

// axeSource reads axe.min.js from the project's .tools/npm; the error says
// how to install it.
func axeSource() ([]byte, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, errors.New("no go.mod above the working directory: run the tests from the repository")
		}
		dir = parent
	}
	p := filepath.Join(dir, ".tools", "npm", "node_modules", "axe-core", "axe.min.js")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("axe-core is not installed at %s: run make deps (or: npm install --prefix .tools/npm %s)", p, AxePackage)
	}
	return b, nil
}

// Axe scans the page of ctx with axe-core for the WCAG 2.1 A and AA rules
// and returns the violations. axe is evaluated through DevTools, which the
// page's CSP does not govern, so the page keeps its own.
func Axe(t testing.TB, ctx context.Context) []Violation {
	t.Helper()
	src, err := axeSource()
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](string(src))); err != nil {
		t.Fatalf("loading axe-core into the page: %v", err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](
		`axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}}).then(r => JSON.stringify(r.violations))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("running axe-core: %v", err)
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		t.Fatalf("axe-core's result %q: %v", raw, err)
	}
	var out []Violation
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("axe-core's violations %q: %v", text, err)
	}
	return out
}
