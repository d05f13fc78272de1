package pi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/backends/pi/rpc"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/agentcli"
)

// printTurn is what one `pi --mode json` printed that iterion reads.
type printTurn struct {
	session  string
	messages []message // of every agent_end, in order
	retries  int
}

// executePrint runs the node as print mode does (ITERION_PI_MODE=print):
// one `pi --mode json` per turn, the prompt on stdin, the session
// continued by the next turn (a late message, the repair of an invalid
// answer). It reads the same messages as the RPC transport, so that its
// output, failures, tokens and cost are the same; it has no extension,
// hence no interaction tools and no steering.
func (b *Backend) executePrint(ctx context.Context, task *engine.Task, inv *invocation) (*engine.Result, error) {
	if !inv.proxied(inv.model.provider) && b.subscriptionOnly(inv.model.provider, inv.agentDir, false) {
		if b.env("ITERION_FORBID_SUBSCRIPTION_OAUTH") == "1" {
			return nil, engine.NewBackendError("AUTH_FAILED", false, errors.New(forbiddenSubscription))
		}
		b.log.Warn(SubscriptionOAuthNotice, "run", task.RunID, "node", task.NodeID)
	}
	var total tally
	var last *message
	session, retries, repaired := "", 0, false
	text := firstMessage(task)
	for {
		turn, err := b.printOnce(ctx, task, inv, text)
		if err != nil {
			return nil, err
		}
		if session == "" {
			session = turn.session
		}
		retries += turn.retries
		for i := range turn.messages {
			if turn.messages[i].Role == "assistant" {
				total.add(turn.messages[i].Usage)
			}
		}
		if m := lastAssistant(turn.messages); m != nil {
			last = m
		}
		if inv.resumeFile == "" {
			// The next turn continues this session.
			files, _ := filepath.Glob(filepath.Join(inv.sessionDir, "*.jsonl"))
			if len(files) == 1 {
				inv.resumeFile = files[0]
			}
		}
		if last != nil && last.StopReason != "error" && last.StopReason != "aborted" && task.InboxDrain != nil {
			msgs, err := task.InboxDrain(ctx)
			if err != nil {
				return nil, fmt.Errorf("reading the inbox: %w", err)
			}
			if len(msgs) > 0 {
				text = guardSlash(strings.Join(msgs, "\n\n"))
				continue
			}
		}
		out, invalid, err := finalOutput(last, task.OutputSchema)
		if err != nil {
			return nil, err
		}
		if invalid != nil {
			if repaired {
				return nil, engine.NewBackendError(engine.CodeSchemaValidation, false, fmt.Errorf("the final answer is not valid output after a repair turn: %v", invalid))
			}
			repaired = true
			text = engine.OutputRepairPrompt(invalid)
			continue
		}
		if retries > 0 {
			b.log.Warn("pi retried model calls itself despite its settings: their tokens are not all counted", "run", task.RunID, "node", task.NodeID, "retries", retries)
		}
		res := &engine.Result{Output: out, SessionID: session, EffectiveModel: last.Provider + "/" + last.Model}
		b.account(res, total, res.EffectiveModel)
		return res, nil
	}
}

// printOnce runs one `pi --mode json` with text on its stdin.
func (b *Backend) printOnce(ctx context.Context, task *engine.Task, inv *invocation, text string) (*printTurn, error) {
	stdoutR, stdoutW := io.Pipe()
	errOut := &agentcli.Tail{Max: 8 << 10}
	p, err := inv.process(&engine.Process{
		Argv: inv.argv("json"), Env: inv.env(b.printKeyEnv(inv)...), Mounts: inv.mounts(),
		Stdin: strings.NewReader(text), Stdout: stdoutW, Stderr: errOut,
	})
	if err != nil {
		return nil, err
	}
	turn := &printTurn{}
	read := make(chan error, 1)
	go func() {
		r := rpc.NewLineReader(stdoutR, rpc.MaxLine)
		var err error
		for {
			var line []byte
			if line, err = r.Next(); err != nil {
				break
			}
			var head struct {
				Type string `json:"type"`
				ID   string `json:"id"`
			}
			if json.Unmarshal(line, &head) != nil {
				continue
			}
			switch head.Type {
			case "session":
				turn.session = head.ID
			case "auto_retry_start":
				turn.retries++
			case "agent_end":
				var end struct {
					Messages []message `json:"messages"`
				}
				if err = json.Unmarshal(line, &end); err != nil {
					break
				}
				turn.messages = append(turn.messages, end.Messages...)
			}
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		_, _ = io.Copy(io.Discard, stdoutR)
		read <- err
	}()
	res, err := task.Run(ctx, p)
	stdoutW.Close()
	rerr := <-read
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, err
	case rerr != nil:
		return nil, fmt.Errorf("reading pi's output: %w", rerr)
	case res.Limit != "":
		return nil, engine.NewBackendError(engine.CodeSandboxLimit, false, fmt.Errorf("pi broke the sandbox's %s limit (%s)", res.Limit, res.Detail))
	case len(turn.messages) == 0:
		return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("pi ended (exit %d) without a turn%s", res.ExitCode, errOut.Said("pi")))
	}
	return turn, nil
}

// firstMessage is what an execution starts with: the node's prompt, or on
// resume the operator's answer.
func firstMessage(t *engine.Task) string {
	if t.ResumeConversation == nil {
		return guardSlash(t.User)
	}
	var s savedSession
	_ = json.Unmarshal(t.ResumeConversation, &s)
	switch {
	case s.Tool == asktools.AwaitAnswers:
		return guardSlash(t.ResumeAnswer)
	case s.Tool == "permission" && s.Call != nil && asktools.PermissionAllowed(t.ResumeAnswer):
		return resumeAllowedText + s.Call.Tool
	case s.Tool == "permission" && s.Call != nil:
		return "Your " + s.Call.Tool + " call was " + asktools.PermissionDeniedText(t.ResumeAnswer)
	}
	return resumeAskPrefix + t.ResumeAnswer
}
