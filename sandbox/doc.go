// Package sandbox runs the processes of a run: tool nodes, an agent's bash
// tool, the CLI agent backends. It is the one seam they all go through, so
// that what a PR controls never reaches the server: a process sees its
// workspace and nothing else of the host, gets only the environment the
// caller allowlisted, is bounded by Limits, and dies with its whole process
// tree when it exits, when its context is done, its wall time passes,
// Process.Kill is called, or the server itself dies.
//
// A Driver starts processes from a Spec. There are three, chosen by name
// with New:
//
//   - bwrap, the default, runs each process under bubblewrap (0.8 or later)
//     in new user, pid, mount, IPC, UTS, cgroup and network namespaces
//     (NetworkOpen keeps the host's network namespace). Inside, the
//     process is uid 1000 ("iterion") with no capabilities, no new
//     privileges, nested user namespaces disabled (--disable-userns) and a
//     seccomp filter that refuses mount, namespaces, ptrace and
//     process_vm_*, the keyring, bpf, perf_event_open, kexec, modules,
//     reboot, swap, open_by_handle_at, userfaultfd and io_uring (see
//     seccomp.go). It sees /usr and the /bin, /sbin, /lib* links
//     read-only; a short allowlist of /etc (name resolution, certificates
//     without /etc/ssl/private, the linker cache, time zone, Debian's
//     alternatives, shell profiles; small files are copied in at each
//     start, directories bound read-only; passwd and group are written for
//     the sandbox); its own /proc, which shows only its own processes; a
//     minimal /dev; a private tmpfs /tmp; a private HOME (a tmpfs at
//     /home/iterion unless Spec.Home names a directory); the workspace
//     read-write at its own path; and Spec.Mounts. The root is read-only.
//     Nothing else: not the store, the keys, the server's socket or owner
//     file, other workspaces, /sys, or the server's processes and their
//     environment.
//
//   - docker runs each process in a container of the operator's image
//     (Options.DockerImage) with the docker CLI; see Docker.
//
//   - host runs processes directly, as the server's user: the explicit
//     opt-out. It isolates nothing (Isolated reports false so callers can
//     warn); see Host for what it still guarantees.
//
// # When the server runs as root
//
// bwrap maps the sandbox's uid 1000 to the server's uid outside. For a root
// server that is uid 0 without any capability: files bound into the
// sandbox are accessed with root's permissions on them (bind only what the
// process may read or write), and the kernel's few checks of the uid
// itself apply. The one that mattered, writing sysctls, is closed: bwrap
// binds /proc/sys, /proc/fs, /proc/irq, /proc/bus and /proc/sysrq-trigger
// read-only and hides kcore, keys, timer_list and the like, as Docker does
// for a container. With NetworkOpen, a host service that trusts the peer
// credentials of a unix socket (abstract sockets are shared with the
// network namespace) would see uid 0; running the server as a dedicated
// user removes the whole class.
//
// # Limits
//
// The bwrap and host drivers find, once per server, where they can make
// cgroups: a cgroup v2 hierarchy with the pids and memory controllers (its
// root, or a delegated Options.CgroupParent), else the server's own
// cgroups in the v1 pids, memory and cpuacct hierarchies, when writable.
// With cgroups, Processes is pids.max, Memory the memory limit (swap
// included where accounted), CPUTime the tree's total CPU time read by a
// watchdog, and the host driver kills the tree through its cgroup. What no
// cgroup covers falls back to rlimits set on the process before it runs:
// RLIMIT_AS for Memory, RLIMIT_NPROC for Processes (which the kernel does
// not enforce for root, and which counts per user), RLIMIT_CPU per process
// for CPUTime. OpenFiles and FileSize are always rlimits; under bwrap they
// are set on the command by prlimit(1) inside, since on bwrap itself they
// would stop its set-up. Driver.Mechanism says which applies, for the
// logs.
//
// A process is put in its cgroups and given its rlimits before it runs:
// it starts in a small /bin/sh gate that waits on a pipe; the server moves
// it into its cgroups and sets the rlimits, and the gate then execs the
// real program under the same pid.
//
// A breach is reported in Result.Limit and as a *LimitError from Wait and
// Run: wall_time when the sandbox killed the tree at Limits.WallTime;
// cpu_time when the watchdog did at Limits.CPUTime, or on SIGXCPU from
// RLIMIT_CPU; memory when the cgroup's OOM killer killed a process
// (memory.oom_control or memory.events oom_kill; docker's
// State.OOMKilled); processes when a fork was refused at pids.max
// (pids.events); file_size on SIGXFSZ. The signal-based ones are
// heuristics (a command that exits 152 or 153 on its own reads the same).
// Without a memory cgroup an allocation past RLIMIT_AS fails inside the
// process and is not reported; an open_files breach never is (the process
// sees EMFILE); docker cannot report a processes breach.
//
// # Process trees
//
// Under bwrap the command's tree lives in a pid namespace: when the
// command exits or the sandbox's init is killed, the kernel kills every
// process left in it, and Wait returns only once the init, and so the
// whole tree, is gone. bwrap's --die-with-parent and the Pdeathsig set on
// bwrap take the tree down if the server is SIGKILLed. Under the host
// driver the tree is the process's cgroup (without cgroups, its process
// group, which a process can leave), killed when the command exits; if the
// server is SIGKILLed only the direct child dies, and the next server's
// drivers kill what is left in the cgroups of dead servers when they
// start.
//
// Every process starts in a session of its own (no controlling terminal)
// and gets only its three standard streams: starting one marks every
// descriptor of the server close-on-exec (Go's own already are), so that
// none the server inherited open leaks in.
//
// The package builds on every platform, but the drivers work only on Linux
// (5.3 or later, for pidfds); elsewhere Available says so.
package sandbox
