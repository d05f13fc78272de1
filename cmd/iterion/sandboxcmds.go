package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/iterion-bot/iterion/backends/askmcp"
	"github.com/iterion-bot/iterion/backends/claudecode"
	"github.com/iterion-bot/iterion/backends/runchannel"
)

// The subcommands iterion runs inside a node's sandbox, for the agent CLI
// backends (package backends/runchannel). They are hidden: people do not
// run them.

func (a *App) newSandboxExecCmd() *cobra.Command {
	return &cobra.Command{
		Use:   runchannel.ExecCommand + " [--forward 127.0.0.1:PORT=SOCKET]... -- COMMAND [ARG]...",
		Short: "Run an agent CLI in a sandbox with its model proxy reachable on the sandbox's loopback",
		Long: `sandbox-exec listens on each --forward address (a loopback address of the
sandbox) and forwards every connection to the unix socket named, then runs
COMMAND with this process's environment and streams. Signals are passed on,
the command's exit status is sandbox-exec's (128+n for signal n), and the
command's process group ends with it. Its own failures exit 125, a command
that cannot start 126, a command not found 127. iterion's CLI backends run
their CLI under it; see docs/sandbox.md (model-only).`,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			// The process's own streams and environment: it is the sandbox's
			// process, not an App in a test.
			if code := runchannel.Exec(args, os.Stdin, a.stdout(), a.stderr()); code != 0 {
				return exitCodeError(code)
			}
			return nil
		},
	}
}

func (a *App) newMCPAskUserCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp-ask-user",
		Short: "Serve a node's ask_user tools over MCP on stdio, for Claude Code in the sandbox",
		Long: `mcp-ask-user is the MCP server (stdio) that Claude Code starts inside a
node's sandbox. It offers the node's interaction tools (ask_user, and on an
async node ask_user_async and await_answers), the same as claw's, and runs
each call over the node's run channel, which the environment names
(ITERION_CHANNEL, ITERION_CHANNEL_TOKEN, ITERION_RUN_ID, ITERION_NODE_ID).`,
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return askmcp.Main(cmd.Context(), a.getenv, cmd.InOrStdin(), a.stdout(), buildVersion())
		},
	}
}

func (a *App) newClaudeHookCmd() *cobra.Command {
	return &cobra.Command{
		Use:   claudecode.HookCommand,
		Short: "Decide a Claude Code tool call by the workflow's permission policy (a PreToolUse hook)",
		Long: `claude-hook is the PreToolUse hook Claude Code runs inside a node's sandbox
before every tool call: it reads the call on stdin, asks the node's run channel
(ITERION_CHANNEL, ITERION_CHANNEL_TOKEN, ITERION_RUN_ID, ITERION_NODE_ID) for the
workflow's permission: decision and prints it. Any failure exits 2, which blocks
the call; see docs/claude_code.md.`,
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if code := claudecode.HookMain(cmd.Context(), a.getenv, cmd.InOrStdin(), a.stdout(), a.stderr()); code != 0 {
				return exitCodeError(code)
			}
			return nil
		},
	}
}
