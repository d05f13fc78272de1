package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/dsl/expr"
)

// execNode runs one node and returns its output.
func (rs *runState) execNode(ctx context.Context, n *dsl.Node, input map[string]any, iteration int, branch string) (map[string]any, error) {
	switch n.Kind {
	case dsl.NodeCompute:
		return rs.compute(n, input)
	case dsl.NodeTool:
		return rs.tool(ctx, n, input)
	case dsl.NodeRouter:
		if n.Router.Mode == dsl.RouterLLM {
			return rs.llm(ctx, n, input, iteration, branch)
		}
		return input, nil // a router passes its input on
	case dsl.NodeEmit:
		return rs.emitEvent(n, input)
	case dsl.NodeWait:
		return rs.wait(ctx, n)
	case dsl.NodeAwaitAnswers:
		return rs.awaitAnswers(ctx, n, branch)
	case dsl.NodeFail:
		msg, err := renderText(n.Fail.Message, rs.scope(input))
		if err != nil {
			return nil, failf(CodeExecutionFailed, "message: %v", err)
		}
		if msg == "" {
			msg = fmt.Sprintf("workflow reached fail node %q", n.ID)
		}
		return nil, failf(CodeFailNode, "%s", msg)
	case dsl.NodeHuman:
		if n.Human.Interaction == dsl.InteractionHuman {
			if branch != "" {
				return nil, errPaused
			}
			return nil, rs.pauseForHuman(ctx, n, input, iteration)
		}
		return rs.llm(ctx, n, input, iteration, branch)
	case dsl.NodeAgent, dsl.NodeJudge:
		return rs.llm(ctx, n, input, iteration, branch)
	}
	return nil, failf(CodeExecutionFailed, "node kind %s cannot run", n.Kind)
}

// compute evaluates each expression of a compute node in order.
func (rs *runState) compute(n *dsl.Node, input map[string]any) (map[string]any, error) {
	s := rs.scope(input)
	out := map[string]any{}
	for _, f := range n.Compute.Fields {
		v, err := f.Expr.Eval(s)
		if err != nil {
			return nil, failf(CodeExpressionFailed, "field %s = %s: %v", f.Name, f.Expr.Source(), err)
		}
		if n.Output != nil {
			if field := n.Output.Field(f.Name); field != nil {
				v, err = conform(v, field)
				if err != nil {
					return nil, failf(CodeExpressionFailed, "field %s = %s: %v", f.Name, f.Expr.Source(), err)
				}
			}
		}
		out[f.Name] = v
	}
	return out, nil
}

// conform converts an expression result to a schema field's type where
// the conversion loses nothing (an integral float under int, an int under
// float) and refuses the rest.
func conform(v any, f *dsl.Field) (any, error) {
	if f.Type.List {
		return v, nil
	}
	switch f.Type.Kind {
	case dsl.TypeInt:
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
				return int64(x), nil
			}
			return nil, fmt.Errorf("%v is not a whole number (field is int)", x)
		}
	case dsl.TypeFloat:
		switch x := v.(type) {
		case int64:
			return float64(x), nil
		case float64:
			return x, nil
		}
	case dsl.TypeBool:
		if _, ok := v.(bool); ok {
			return v, nil
		}
	case dsl.TypeString:
		if _, ok := v.(string); ok {
			return v, nil
		}
	default:
		return v, nil
	}
	return nil, fmt.Errorf("%s value %v does not fit field of type %s", expr.TypeName(v), v, f.Type)
}

// maxToolOutput bounds what a tool's stdout may bring into a run.
const maxToolOutput = 4 << 20

// tool runs a tool node's command with bash -c in the run's workspace,
// inside the sandbox. Stdout that is a JSON object is the output; any other
// text becomes {result: text}, unless the node declares an output schema:
// then it fails the node, quoted. A non-zero exit fails the node with the
// tail of stderr.
func (rs *runState) tool(ctx context.Context, n *dsl.Node, input map[string]any) (map[string]any, error) {
	p := &Process{Node: n, MaxStdout: maxToolOutput, MaxStderr: 64 << 10}
	if n.Tool.Script != nil {
		// A script is read from standard input by its interpreter.
		script, refs, err := renderScript(n.Tool.Script, n.Tool.Language, rs.scope(input))
		if err != nil {
			return nil, err
		}
		p.Argv, p.Env, p.Stdin = scriptArgv[n.Tool.Language], refs, strings.NewReader(script)
	} else {
		command, refs, err := renderCommand(n.Tool.Command, rs.scope(input))
		if err != nil {
			return nil, err
		}
		p.Argv, p.Env = []string{"bash", "-c", command}, refs
	}
	res, err := rs.runProcess(ctx, p)
	if err != nil {
		if n.Tool.Script != nil {
			return nil, fmt.Errorf("running the %s script with %s: %w (is %s installed where the node's processes run?)", n.Tool.Language, p.Argv[0], err, p.Argv[0])
		}
		return nil, err
	}
	if n.Tool.Script != nil && res.ExitCode == 127 && strings.Contains(string(res.Stderr), "not found") {
		return nil, failf(CodeExecutionFailed, "the %s script's interpreter %s is not installed where the node's processes run: %s", n.Tool.Language, p.Argv[0], tail(string(res.Stderr), 300))
	}
	if res.ExitCode != 0 {
		// Scrubbed before it is cut: a cut secret would not be found.
		return nil, failf(CodeExecutionFailed, "command exited with status %d: %s", res.ExitCode, tail(rs.e.redact.String(string(res.Stderr)), 2000))
	}
	if res.StdoutTruncated {
		return nil, failf(CodeExecutionFailed, "command printed more than %d bytes", maxToolOutput)
	}
	text := strings.TrimSpace(string(res.Stdout))
	var obj map[string]any
	var jerr error
	if strings.HasPrefix(text, "{") {
		if jerr = json.Unmarshal([]byte(text), &obj); jerr == nil && obj != nil {
			return normalize(obj).(map[string]any), nil
		}
	}
	if n.Output == nil {
		return map[string]any{"result": text}, nil
	}
	// A declared schema means the command must print its fields: wrapping
	// the text would only fail the schema with a less useful message.
	printed := "nothing"
	if text != "" {
		// Scrubbed before it is cut: a cut secret would not be found.
		printed = quoteStart(rs.e.redact.String(text), 200)
	}
	why := ""
	if jerr != nil {
		why = fmt.Sprintf(" (%v)", jerr)
	}
	return nil, failf(CodeSchemaValidation, "command exited with status %d and printed %s, which is not a JSON object%s: output schema %s needs one with its fields", res.ExitCode, printed, why, n.Output.Name)
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	if s == "" {
		return "(no output on stderr)"
	}
	return s
}

// normalize turns decoded JSON numbers into int64 where they are whole,
// matching what expressions produce.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
	}
	return v
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		if x == math.Trunc(x) {
			return int64(x), true
		}
	}
	return 0, false
}

// emitEvent publishes an emit node's payload in the run's sticky registry.
func (rs *runState) emitEvent(n *dsl.Node, input map[string]any) (map[string]any, error) {
	s := rs.scope(input)
	payload := map[string]any{}
	for _, m := range n.Event.With {
		v, err := renderValue(m.Value, s)
		if err != nil {
			return nil, failf(CodeExecutionFailed, "with %s: %v", m.Key, err)
		}
		payload[m.Key] = v
	}
	rs.mu.Lock()
	rs.ck.Emitted[n.Event.Name] = payload
	rs.mu.Unlock()
	rs.e.bell.ring()
	return payload, nil
}

// wait blocks until its event has been emitted (earlier emits count) or
// its timeout passes. In a branch it gives its slot back while it waits.
func (rs *runState) wait(ctx context.Context, n *dsl.Node) (map[string]any, error) {
	deadline := time.NewTimer(n.Timeout)
	defer deadline.Stop()
	slot := slotFrom(ctx)
	defer func() { _ = slot.acquire(ctx) }()
	for {
		ring := rs.e.bell.wait()
		rs.mu.Lock()
		payload, ok := rs.ck.Emitted[n.Event.Name]
		rs.mu.Unlock()
		if ok {
			return payload, nil
		}
		slot.release()
		select {
		case <-ring:
		case <-deadline.C:
			return nil, failf(CodeTimeout, "event %q was not emitted within %s", n.Event.Name, n.Timeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
