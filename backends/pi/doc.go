// Package pi is the pi backend (backend: "pi"): it runs a node on pi, the
// multi-provider coding agent (@mariozechner/pi-coding-agent, pinned at
// 0.73.1), inside the node's sandbox (ADR-085).
//
// Two transports share everything but their wire: model resolution and
// the effort mapping, the argv and the environment, the per-execution
// agent directory, failure typing and accounting. The default is one
// long-lived `pi --mode rpc` per node session, driven over pi's JSONL RPC
// protocol (package rpc): the prompt goes through the prompt command,
// answers reach the agent through steer as soon as they are recorded, and
// an embedded extension (extension/, bundled into iterion-pi.js) offers the
// interaction tools. ITERION_PI_MODE=print is the operator's rollback: one
// `pi --mode json` per turn, the prompt on stdin, no extension and so no
// async questions (its Capabilities say so, and the engine refuses such a
// node before pi starts).
//
// What pi sees:
//   - the node's task as --append-system-prompt, a file, so that pi keeps
//     its own prompt and the repository's context files (AGENTS.md,
//     CLAUDE.md; ITERION_PI_NO_CONTEXT_FILES=1 turns them off);
//   - a copy of the operator's agent directory (PI_CODING_AGENT_DIR,
//     default ~/.pi/agent, without its sessions): models.json, auth.json
//     and settings are honoured, and what pi writes there (settings,
//     refreshed tokens) never reaches the operator's files; pi's own
//     retries are turned off in it, iterion retries;
//   - its sessions in a directory of the execution, removed with it: a
//     paused node's session travels in the checkpoint and is written back
//     when the node resumes;
//   - no real key: the run channel's model proxy (route.go) carries the
//     providers it can, pi holds a dummy key, and the sandbox's network is
//     model-only unless the node asks for open;
//   - no extension of the repository (.pi/) unless ITERION_PI_TRUST_PROJECT=1:
//     pi runs extensions as code in the process that holds the run's keys.
//
// Failures are typed from the last assistant message (pi exits 0 on a
// failed model call): rate limits, authentication, overload, context
// length. Tokens are input plus output (cache reads and writes are not
// billed input); the cost is the one pi reports, else the Options' price.
package pi
