//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Docker runs each process in a container of the operator's image with the
// docker CLI: a read-only root, no capabilities, no-new-privileges, a
// non-root user, its own pid namespace with an init (the tree dies with the
// command), and the workspace and mounts bound at their own paths.
//
// Limits map to --pids-limit, --memory (with --memory-swap equal, so no
// swap), --ulimit cpu, nofile and fsize, and the wall time to docker kill.
// A memory breach is read from the container's State.OOMKilled before the
// container is removed; a processes breach cannot be told from outside.
// If the server is SIGKILLed, the CLI dies but the container runs on until
// its command ends: containers carry the label iterion.sandbox, so an
// operator can remove leftovers with
// `docker rm -f $(docker ps -aq --filter label=iterion.sandbox)`.
type Docker struct {
	opts Options
}

var _ Driver = (*Docker)(nil)

// NewDocker returns the docker driver for opts.DockerImage.
func NewDocker(opts Options) *Docker { return &Docker{opts: opts} }

// Name returns "docker".
func (d *Docker) Name() string { return "docker" }

// Isolated returns true.
func (d *Docker) Isolated() bool { return true }

// Mechanism says how limits are enforced.
func (d *Docker) Mechanism() string {
	return "docker (--pids-limit, --memory, --ulimit cpu per process, nofile, fsize)"
}

func (d *Docker) bin() (string, error) {
	name := d.opts.DockerPath
	if name == "" {
		name = "docker"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return "", errors.New("the docker CLI is not installed: install docker (or choose sandbox: bwrap)")
	}
	return bin, nil
}

// errNoImage is returned when Options.DockerImage is empty.
var errNoImage = errors.New("the docker sandbox needs an image: set sandbox.docker_image in the server's config (Options.DockerImage)")

// Available returns nil when an image is configured, the docker CLI is
// installed and a Docker engine answers it.
func (d *Docker) Available() error {
	if d.opts.DockerImage == "" {
		return errNoImage
	}
	bin, err := d.bin()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "version", "--format", "{{.Server.Version}}")
	cmd.Env = d.cliEnv(nil)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("no Docker engine answers (docker version: %v: %s): start the engine, or choose sandbox: bwrap", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Start starts s in a new container.
func (d *Docker) Start(ctx context.Context, s Spec) (*Process, error) {
	if d.opts.DockerImage == "" {
		return nil, errNoImage
	}
	bin, err := d.bin()
	if err != nil {
		return nil, err
	}
	if err := checkSpec(&s); err != nil {
		return nil, err
	}
	var id [6]byte
	rand.Read(id[:])
	name := "iterion-" + hex.EncodeToString(id[:])
	home := s.Home
	if home == "" {
		home = sandboxHome
	}
	env := mergeEnv(s.Env, home, "/tmp", s.Dir)
	args, err := d.runArgs(&s, name, home, env)
	if err != nil {
		return nil, err
	}
	docker := func(timeout time.Duration, args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = d.cliEnv(nil)
		return cmd.Output()
	}
	lim := s.Limits
	l := &launch{
		path:        bin,
		argv:        append([]string{bin}, args...),
		env:         d.cliEnv(env),
		dir:         "/",
		treeDead:    true,
		selfLimited: true,
		kill: func(p *Process) {
			if _, err := docker(30*time.Second, "kill", name); err != nil {
				// Not created yet, or the engine is gone: stop the CLI;
				// cleanup removes a container created meanwhile.
				syscall.Kill(p.pid, syscall.SIGKILL)
			}
		},
		breach: func(p *Process) string {
			out, err := docker(30*time.Second, "inspect", "--format", "{{.State.OOMKilled}}", name)
			if err == nil && lim.Memory > 0 && strings.TrimSpace(string(out)) == "true" {
				return LimitMemory
			}
			return ""
		},
		cleanup: func() { docker(30*time.Second, "rm", "-f", name) },
	}
	return start(ctx, &s, l, nil)
}

// dockerControl are the variables the docker CLI itself reads; they come
// from the server's environment, never from the sandbox's.
var dockerControl = []string{"DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "DOCKER_API_VERSION"}

// loaderVar reports whether the C library's loader or resolver reads k
// (glibc's list of variables it ignores in setuid programs): the docker
// CLI, which runs on the host, must not see the sandbox's values of them.
func loaderVar(k string) bool {
	if strings.HasPrefix(k, "LD_") {
		return true
	}
	switch k {
	case "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "MALLOC_TRACE",
		"NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR":
		return true
	}
	return false
}

// cliEnv is the docker CLI's environment: the sandbox's variables, which
// the CLI forwards to the container by name (-e KEY, so that their values
// never appear in a command line that other users can read), plus the
// server's docker settings.
func (d *Docker) cliEnv(sandboxEnv []string) []string {
	var env []string
	for _, kv := range sandboxEnv {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(dockerControl, k) && !loaderVar(k) {
			env = append(env, kv)
		}
	}
	for _, k := range dockerControl {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := os.LookupEnv("DOCKER_CONFIG"); !ok {
		if h, err := os.UserHomeDir(); err == nil {
			env = append(env, "DOCKER_CONFIG="+filepath.Join(h, ".docker"))
		}
	}
	if _, ok := envValue(env, "PATH"); !ok {
		env = append(env, "PATH="+os.Getenv("PATH"))
	}
	return env
}

// runArgs returns the arguments of docker run for s.
func (d *Docker) runArgs(s *Spec, name, home string, env []string) ([]string, error) {
	user := d.opts.DockerUser
	if user == "" {
		user = "1000:1000"
	}
	network := "none"
	if s.Network == NetworkOpen {
		network = "host"
	}
	a := []string{
		"run", "-i", "--name", name, "--label", "iterion.sandbox=1", "--init",
		"--pull", "missing",
		"--network", network, "--hostname", "iterion",
		"--user", user, "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--read-only",
	}
	size := ""
	if s.Limits.Memory > 0 {
		size = ",size=" + strconv.FormatInt(s.Limits.Memory, 10)
	}
	a = append(a, "--tmpfs", "/tmp:rw,exec,mode=1777"+size)
	if s.Home == "" {
		a = append(a, "--tmpfs", home+":rw,exec,mode=1777"+size)
	}
	binds := []Mount{{Source: s.Dir, Writable: !s.ReadOnlyDir}}
	if s.Home != "" {
		binds = append(binds, Mount{Source: s.Home, Writable: true})
	}
	for _, m := range append(binds, s.Mounts...) {
		t := m.Target
		if t == "" {
			t = m.Source
		}
		fields := []string{"type=bind", "source=" + m.Source, "target=" + t}
		if !m.Writable {
			fields = append(fields, "readonly")
		}
		v, err := csvField(fields)
		if err != nil {
			return nil, err
		}
		a = append(a, "--mount", v)
	}
	a = append(a, "--workdir", s.Dir)
	lim := s.Limits
	if lim.Processes > 0 {
		a = append(a, "--pids-limit", strconv.Itoa(lim.Processes+1)) // + docker's init
	}
	if lim.Memory > 0 {
		m := strconv.FormatInt(lim.Memory, 10)
		a = append(a, "--memory", m, "--memory-swap", m)
	}
	if lim.CPUTime > 0 {
		secs := int64((lim.CPUTime + time.Second - 1) / time.Second)
		a = append(a, "--ulimit", fmt.Sprintf("cpu=%d:%d", secs, secs+1))
	}
	if lim.OpenFiles > 0 {
		a = append(a, "--ulimit", fmt.Sprintf("nofile=%d:%d", lim.OpenFiles, lim.OpenFiles))
	}
	if lim.FileSize > 0 {
		a = append(a, "--ulimit", fmt.Sprintf("fsize=%d:%d", lim.FileSize, lim.FileSize))
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if slices.Contains(dockerControl, k) || loaderVar(k) {
			// The CLI's own variables, and those its dynamic loader reads,
			// cannot carry the sandbox's value: given here instead.
			a = append(a, "--env", k+"="+v)
			continue
		}
		a = append(a, "--env", k)
	}
	a = append(a, d.opts.DockerImage)
	return append(a, s.Argv...), nil
}

// csvField joins fields the way docker parses --mount: as one CSV record,
// so that a path with a comma or a quote stays one field.
func csvField(fields []string) (string, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(fields); err != nil {
		return "", fmt.Errorf("sandbox: mount option: %w", err)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return "", fmt.Errorf("sandbox: mount option: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
