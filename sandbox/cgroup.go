//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// cgroupNeeds says which cgroups a process tree gets.
type cgroupNeeds struct {
	track  bool // any cgroup that lists the whole tree, to kill all of it
	pids   bool
	memory bool
	cpu    bool
}

func (n cgroupNeeds) any() bool { return n.track || n.pids || n.memory || n.cpu }

func needsFor(l Limits, track bool) cgroupNeeds {
	return cgroupNeeds{track: track, pids: l.Processes > 0, memory: l.Memory > 0, cpu: l.CPUTime > 0}
}

// cgroups is what this host offers for per-process cgroups, found once.
//
// Each process tree gets a cgroup <base>/<owner>/<n> in each hierarchy it
// needs, where base is the server's own cgroup there (v1), or the cgroup v2
// root or Options.CgroupParent (v2), and owner is "iterion.<pid>.<start
// time>" of the server. Nesting under the server's own cgroups keeps the
// trees inside whatever limits the server itself runs under. The owner
// directory exists only while a tree does, so that a server leaves no
// cgroup behind when it is idle.
type cgroups struct {
	v2    bool
	base  map[string]string // "pids", "memory", "cpu" → base directory
	owner string

	mu   sync.Mutex
	refs int
	seq  atomic.Uint64
}

var (
	cgroupsMu    sync.Mutex
	cgroupsFound = map[string]*cgroups{} // by Options.CgroupParent
)

// hostCgroups returns the cgroups usable here, nil if none; drivers in one
// server share them. The first call for a parent removes the cgroups left
// by servers that died (and kills what is left in them).
func hostCgroups(parent string) *cgroups {
	cgroupsMu.Lock()
	defer cgroupsMu.Unlock()
	if c, ok := cgroupsFound[parent]; ok {
		return c
	}
	c := detectCgroups(parent)
	if c != nil {
		c.sweep()
	}
	cgroupsFound[parent] = c
	return c
}

func detectCgroups(parent string) *cgroups {
	owner, err := ownerName(os.Getpid())
	if err != nil {
		return nil
	}
	c := &cgroups{owner: owner, base: map[string]string{}}
	if parent != "" {
		if c.tryV2(parent) {
			return c
		}
		return nil
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil
	}
	own, err := ownCgroups()
	if err != nil {
		return nil
	}
	if m, ok := mounts["cgroup2"]; ok && own[""] == m.root {
		if c.tryV2(m.point) {
			return c
		}
	}
	for ctl, v1 := range map[string]string{"pids": "pids", "memory": "memory", "cpu": "cpuacct"} {
		m, ok := mounts[v1]
		if !ok {
			continue
		}
		path, ok := own[v1]
		if !ok {
			continue
		}
		// The mount may show a subtree (a bind, a cgroup namespace): the
		// server's cgroup must lie inside it.
		if m.root != "/" && path != m.root && !strings.HasPrefix(path, m.root+"/") {
			continue
		}
		base := filepath.Join(m.point, strings.TrimPrefix(path, m.root))
		if probeDir(filepath.Join(base, owner)) {
			c.base[ctl] = base
		}
	}
	if len(c.base) == 0 {
		return nil
	}
	return c
}

// tryV2 uses dir, in a cgroup v2 hierarchy, when its pids and memory
// controllers can be enabled for the cgroups made below it.
func (c *cgroups) tryV2(dir string) bool {
	ctls, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return false
	}
	have := strings.Fields(string(ctls))
	if !slices.Contains(have, "pids") || !slices.Contains(have, "memory") {
		return false
	}
	if !enableControllers(dir) {
		return false
	}
	o := filepath.Join(dir, c.owner)
	if err := os.Mkdir(o, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return false
	}
	ok := enableControllers(o)
	os.Remove(o)
	if !ok {
		return false
	}
	c.v2 = true
	c.base = map[string]string{"pids": dir, "memory": dir, "cpu": dir}
	return true
}

// enableControllers makes pids and memory available to dir's children.
// That is refused in a cgroup that holds processes (except the root), in
// which case the server needs a delegated parent: Options.CgroupParent.
func enableControllers(dir string) bool {
	f := filepath.Join(dir, "cgroup.subtree_control")
	os.WriteFile(f, []byte("+pids +memory"), 0)
	got, err := os.ReadFile(f)
	if err != nil {
		return false
	}
	on := strings.Fields(string(got))
	return slices.Contains(on, "pids") && slices.Contains(on, "memory")
}

// probeDir reports whether dir can be made (and removes it).
func probeDir(dir string) bool {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return errors.Is(err, os.ErrExist)
	}
	os.Remove(dir)
	return true
}

// describe names the cgroup controllers in use, for Mechanism.
func (c *cgroups) describe() string {
	if c == nil {
		return ""
	}
	if c.v2 {
		return "cgroup v2 (pids, memory, cpu) under " + c.base["pids"]
	}
	var names []string
	for _, ctl := range []string{"pids", "memory", "cpu"} {
		if _, ok := c.base[ctl]; ok {
			if ctl == "cpu" {
				ctl = "cpuacct"
			}
			names = append(names, ctl)
		}
	}
	return "cgroup v1 (" + strings.Join(names, ", ") + ")"
}

func (c *cgroups) has(ctl string) bool {
	if c == nil {
		return false
	}
	_, ok := c.base[ctl]
	return ok
}

// bases returns the distinct base directories.
func (c *cgroups) bases() []string {
	var out []string
	for _, b := range c.base {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

func (c *cgroups) acquire() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs == 0 {
		for _, b := range c.bases() {
			o := filepath.Join(b, c.owner)
			err := os.Mkdir(o, 0o755)
			if err != nil && !errors.Is(err, os.ErrExist) {
				err = fmt.Errorf("sandbox: making cgroup %s: %w", o, err)
			} else if err = nil; c.v2 && !enableControllers(o) {
				err = fmt.Errorf("sandbox: enabling pids and memory in cgroup %s", o)
			}
			if err != nil {
				for _, b := range c.bases() {
					rmdirCgroup(filepath.Join(b, c.owner))
				}
				return err
			}
		}
	}
	c.refs++
	return nil
}

func (c *cgroups) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs--
	if c.refs == 0 {
		for _, b := range c.bases() {
			rmdirCgroup(filepath.Join(b, c.owner))
		}
	}
}

// cgroup is the set of cgroups of one process tree.
type cgroup struct {
	c      *cgroups
	dirs   []string
	procs  string // the directory whose cgroup.procs lists the tree
	pids   string
	memory string
	cpu    string
}

// create makes the cgroups of one tree and writes its limits; nil when no
// needed controller is available.
func (c *cgroups) create(n cgroupNeeds, lim Limits, helpers int) (*cgroup, error) {
	var want []string
	if (n.pids || n.track) && c.has("pids") {
		want = append(want, "pids")
	}
	if n.memory && c.has("memory") {
		want = append(want, "memory")
	}
	if n.cpu && c.has("cpu") {
		want = append(want, "cpu")
	}
	if n.track && len(want) == 0 {
		for _, ctl := range []string{"memory", "cpu"} {
			if c.has(ctl) {
				want = append(want, ctl)
				break
			}
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	if err := c.acquire(); err != nil {
		return nil, err
	}
	g := &cgroup{c: c}
	name := strconv.FormatUint(c.seq.Add(1), 10)
	for _, ctl := range want {
		dir := filepath.Join(c.base[ctl], c.owner, name)
		if !slices.Contains(g.dirs, dir) {
			if err := os.Mkdir(dir, 0o755); err != nil {
				g.remove()
				return nil, fmt.Errorf("sandbox: making cgroup: %w", err)
			}
			g.dirs = append(g.dirs, dir)
		}
		switch ctl {
		case "pids":
			g.pids = dir
		case "memory":
			g.memory = dir
		case "cpu":
			g.cpu = dir
		}
	}
	g.procs = g.dirs[0]
	if err := g.setLimits(n, lim, helpers); err != nil {
		g.remove()
		return nil, err
	}
	return g, nil
}

func (g *cgroup) setLimits(n cgroupNeeds, lim Limits, helpers int) error {
	if n.pids && g.pids != "" {
		if err := writeCgroup(g.pids, "pids.max", strconv.Itoa(lim.Processes+helpers)); err != nil {
			return err
		}
	}
	if n.memory && g.memory != "" {
		b := strconv.FormatInt(lim.Memory, 10)
		if g.c.v2 {
			if err := writeCgroup(g.memory, "memory.max", b); err != nil {
				return err
			}
			// No swapping past the limit, where swap is accounted.
			writeCgroup(g.memory, "memory.swap.max", "0")
			return nil
		}
		if err := writeCgroup(g.memory, "memory.limit_in_bytes", b); err != nil {
			return err
		}
		// Memory plus swap capped at the same value, where swap is
		// accounted (the file exists only then).
		if _, err := os.Stat(filepath.Join(g.memory, "memory.memsw.limit_in_bytes")); err == nil {
			if err := writeCgroup(g.memory, "memory.memsw.limit_in_bytes", b); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeCgroup(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("sandbox: writing cgroup %s: %w", file, err)
	}
	return nil
}

// join moves pid into every cgroup of the tree.
func (g *cgroup) join(pid int) error {
	for _, d := range g.dirs {
		if err := writeCgroup(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

func (g *cgroup) hasCPU() bool { return g != nil && g.cpu != "" }

// cpuUsage returns the CPU time the tree has used.
func (g *cgroup) cpuUsage() time.Duration {
	if g.c.v2 {
		return time.Duration(readKey(filepath.Join(g.cpu, "cpu.stat"), "usage_usec")) * time.Microsecond
	}
	b, err := os.ReadFile(filepath.Join(g.cpu, "cpuacct.usage"))
	if err != nil {
		return 0
	}
	ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(ns)
}

// breach reports a memory or processes limit the tree ran into: the
// cgroup's OOM killer killed one of its processes (memory.oom_control or
// memory.events oom_kill), or a fork was refused at pids.max (pids.events
// max).
func (g *cgroup) breach(lim Limits) string {
	if lim.Memory > 0 && g.memory != "" {
		file := "memory.oom_control"
		if g.c.v2 {
			file = "memory.events"
		}
		if readKey(filepath.Join(g.memory, file), "oom_kill") > 0 {
			return LimitMemory
		}
	}
	if lim.Processes > 0 && g.pids != "" && readKey(filepath.Join(g.pids, "pids.events"), "max") > 0 {
		return LimitProcesses
	}
	return ""
}

// readKey reads the value of key in a cgroup file of "key value" lines.
func readKey(file, key string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		if k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// killAll kills every process in the tree's cgroup and waits until none
// is left. With cgroup v2 the kernel does it (cgroup.kill); with v1 every
// listed process is killed, again until the list is empty, so that
// children forked meanwhile are caught too. (A pid read from the list
// could in theory be reused before the kill reaches it; the window is a
// few microseconds against a pid space that wraps in far longer.)
func (g *cgroup) killAll() error {
	if g.procs == "" {
		return nil
	}
	if g.c.v2 {
		os.WriteFile(filepath.Join(g.procs, "cgroup.kill"), []byte("1"), 0)
	}
	self := os.Getpid()
	delay := 50 * time.Microsecond
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, err := readPids(filepath.Join(g.procs, "cgroup.procs"))
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			if pid != self {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox: %d processes in cgroup %s survived SIGKILL", len(pids), g.procs)
		}
		// Killed processes leave the list when they have exited, which
		// takes the kernel some microseconds; there is no event to wait
		// on in v1.
		time.Sleep(delay)
		delay = min(2*delay, 10*time.Millisecond)
	}
}

func readPids(file string) ([]int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("sandbox: reading %s: %w", file, err)
	}
	var pids []int
	for f := range strings.FieldsSeq(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// remove kills what is left and removes the tree's cgroups.
func (g *cgroup) remove() {
	g.killAll()
	for _, d := range g.dirs {
		rmdirCgroup(d)
	}
	g.c.release()
}

// rmdirCgroup removes an empty cgroup directory. Right after its last
// process has exited the kernel may still refuse for a moment (EBUSY).
func rmdirCgroup(dir string) {
	for range 200 {
		err := syscall.Rmdir(dir)
		if err != syscall.EBUSY {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// sweep removes the cgroups left by servers that are no longer running,
// killing the processes still in them: the trees of a server that was
// SIGKILLed, which under the host driver may have outlived it.
func (c *cgroups) sweep() {
	for _, b := range c.bases() {
		entries, err := os.ReadDir(b)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() || !strings.HasPrefix(name, "iterion.") || name == c.owner || ownerAlive(name) {
				continue
			}
			o := filepath.Join(b, name)
			kids, _ := os.ReadDir(o)
			for _, k := range kids {
				if k.IsDir() {
					g := &cgroup{c: c, procs: filepath.Join(o, k.Name())}
					g.killAll()
					rmdirCgroup(g.procs)
				}
			}
			rmdirCgroup(o)
		}
	}
}

// ownerName is "iterion.<pid>.<start time>" for the process pid; the start
// time (in clock ticks since boot) tells a reused pid apart.
func ownerName(pid int) (string, error) {
	st, err := startTime(pid)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("iterion.%d.%d", pid, st), nil
}

func ownerAlive(name string) bool {
	parts := strings.Split(name, ".")
	if len(parts) != 3 {
		return true // not ours to remove
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil {
		return true
	}
	got, err := ownerName(pid)
	return err == nil && got == name
}

// startTime returns field 22 of /proc/<pid>/stat.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may contain spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("sandbox: malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return 0, errors.New("sandbox: malformed /proc stat")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

type cgroupMount struct{ point, root string }

// cgroupMounts maps each v1 controller, and "cgroup2", to where its
// hierarchy is mounted, from /proc/self/mountinfo.
func cgroupMounts() (map[string]cgroupMount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	out := map[string]cgroupMount{}
	unescape := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	for line := range strings.Lines(string(b)) {
		pre, post, ok := strings.Cut(strings.TrimSpace(line), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		m := cgroupMount{point: unescape.Replace(f[4]), root: unescape.Replace(f[3])}
		switch g[0] {
		case "cgroup2":
			if _, dup := out["cgroup2"]; !dup {
				out["cgroup2"] = m
			}
		case "cgroup":
			for opt := range strings.SplitSeq(g[2], ",") {
				if _, dup := out[opt]; !dup {
					out[opt] = m
				}
			}
		}
	}
	return out, nil
}

// ownCgroups maps each v1 controller, and "" for v2, to this process's
// cgroup path, from /proc/self/cgroup.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for ctl := range strings.SplitSeq(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out, nil
}
