// Package claudecode is the Claude Code backend (backend: "claude_code"):
// it runs a node on the Claude Code CLI (@anthropic-ai/claude-code, pinned
// at 2.1.332) inside the node's sandbox, one long-lived process per node
// execution:
//
//	claude -p --input-format stream-json --output-format stream-json --verbose
//	       --replay-user-messages --permission-mode dontAsk --setting-sources ""
//	       --settings FILE --tools BUILTINS [--mcp-config FILE --strict-mcp-config
//	       --allowedTools mcp__iterion] [--model M] [--append-system-prompt-file F]
//	       [--resume SESSION]
//
// The prompt is never on the command line: every message, the first
// included, is a stream-json user message on stdin, and the process lives
// until the node is done (stdin closed). The CLI runs under the node's run
// channel (package runchannel): its model requests go to the run's model
// proxy, with a dummy key, and the real key never enters the sandbox.
//
// What Claude Code sees:
//   - the node's tools: mapped onto its built-ins (dsl.ClaudeCodeTool:
//     read_file is Read, bash is Bash, …), and nothing else; readonly: drops
//     the ones that write (Write, Edit, NotebookEdit, Bash);
//   - the interaction tools as mcp__iterion__ask_user, …ask_user_async and
//     …await_answers, from `iterion mcp-ask-user` (package askmcp), with
//     the texts every backend uses;
//   - a PreToolUse hook, `iterion claude-hook`, that asks the run channel
//     for the workflow's permission: decision on every call. The permission
//     mode is dontAsk, so a call runs only when the hook allows it: a hook
//     that fails, hangs or is missing denies (fail closed). Neither the
//     bypass mode nor IS_SANDBOX=1 is used: the hook is the one gate, it
//     works as root (where the bypass mode is refused), and it cannot fail
//     open;
//   - a private CLAUDE_CONFIG_DIR and HOME in a directory of the execution,
//     removed when it ends, with no settings of the repository, the user or
//     the machine (--setting-sources ""), so a repository cannot bring hooks,
//     permissions or MCP servers of its own. The repository's CLAUDE.md is
//     read as usual;
//   - the node's system prompt appended to Claude Code's own (with the
//     async-questions section and the output schema when the node has
//     them).
//
// Answers reach the agent as soon as they are recorded: at every ring of
// the run's bell (engine.Task.InboxWake) the inbox is drained and each
// message sent on stdin, which Claude Code folds into the turn in progress
// (into the next tool result) or, between turns, answers with a new turn.
// Every message carries an id, and the CLI's command_lifecycle lines say
// when each one is done; the node is done when every message is, the last
// result is a success and a final drain of the inbox brings nothing (a
// late answer forces one more turn).
//
// A blocking ask_user, an await_answers with questions pending and a call
// the permission policy asks a person about pause the run: the CLI's turn
// is interrupted, it exits, and its session transcript travels in the
// checkpoint (engine.NeedsInteractionError.Conversation). The resumed node
// writes it back and continues the same session (--resume) with the
// answer as its next message.
//
// Failures are typed from the result line, not the exit status (which
// says nothing of an API error): authentication, rate
// limits, overload and server errors, context length. Tokens are the
// turns' input and output (cache reads and writes are not billed input);
// the cost is the one Claude Code reports for the turns of this
// execution.
package claudecode
