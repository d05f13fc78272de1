// Package runchannel is the one channel between an agent CLI in a node's
// sandbox (pi, Claude Code) and the iterion server that runs it. A backend
// opens a Session for each execution of a node; the session is an HTTP
// server on a unix socket in a private directory of the host, and it
// serves two things there:
//
//   - /model/<provider>/…: the model proxy. The CLI gets a dummy key of the
//     session's own and a base URL that points here; the proxy accepts only
//     requests carrying that key, swaps it for the provider's real key (which
//     stays in the server's memory), and forwards to the provider's
//     configured base URL alone, streaming the answer (SSE included) as it
//     comes. Any other host, path or provider is refused with a message
//     naming what is allowed. So an agent's bash, which sees everything the
//     CLI sees, never sees a key.
//   - /channel/v1/…: the node's interaction calls (the tools ask_user,
//     ask_user_async and await_answers, the pending questions, the inbox,
//     a permission decision), served from the node's engine.Task and the
//     backend's hooks, with a token of the session's own. Nothing else: not
//     the local admin API, not another run's calls.
//
// The sandbox has no network (policy model-only). Session.Wrap turns the
// backend's process into one that reaches the proxy anyway: it runs the
// iterion binary itself (mounted read-only from os.Executable) as
//
//	iterion sandbox-exec --forward 127.0.0.1:PORT=SOCKET -- CLI ARGS…
//
// which listens on the sandbox's own loopback, forwards each connection to
// the bind-mounted socket, and runs the CLI under it (Exec): signals are
// passed on, its exit status is the wrapper's, and its process group ends
// with it. The subcommands that the CLIs start inside the sandbox (the MCP
// server iterion mcp-ask-user, hooks) use Client over the same socket.
//
// What a backend calls:
//
//	sess, err := runchannel.Open(ctx, task, runchannel.Options{Ask: …, AwaitPending: …})
//	defer sess.Close()
//	p, err := sess.Wrap(&engine.Process{Argv: []string{"claude", "-p", …}, Env: …})
//	res, err := task.Run(ctx, p)
//
// with sess.BaseURL("<provider>") and sess.Key() for configuration files
// the CLI reads (pi's models.json), and sess.Binary() and sess.ChannelEnv()
// for the commands it starts itself (an MCP server).
package runchannel
