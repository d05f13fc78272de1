package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/iterion-bot/iterion/dsl"
)

// A workflow's property values may read the environment
// (${NAME:-default}). A workflow comes from a repository anyone may write
// a pull request to, so it reads only what the operator allows:
// ITERION_WORKFLOW_ENV (a comma-separated list) and serve's workflow_env,
// names or prefixes ending in '*'. Never a variable named under secrets:,
// one the server knows for a secret, or one whose name says it is one.
// Anything else takes its default.

// secretWords mark a variable's name as a secret's.
var secretWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD"}

// workflowEnv is the lookup the runs' workflows read the environment
// through; allow adds serve's workflow_env, secrets serve's secrets:.
func (a *App) workflowEnv(allow, secrets []string) func(string) (string, bool) {
	for _, s := range strings.Split(a.getenv("ITERION_WORKFLOW_ENV"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			allow = append(allow, s)
		}
	}
	if len(allow) == 0 {
		return nil
	}
	denied := slices.Concat(secrets, secretEnvs)
	return func(name string) (string, bool) {
		if !workflowMayRead(name, allow, denied) {
			return "", false
		}
		v := a.getenv(name)
		return v, v != ""
	}
}

// workflowMayRead reports whether a workflow may read variable name.
func workflowMayRead(name string, allow, denied []string) bool {
	upper := strings.ToUpper(name)
	for _, w := range secretWords {
		if strings.Contains(upper, w) {
			return false
		}
	}
	if slices.Contains(denied, name) {
		return false
	}
	for _, a := range allow {
		if prefix, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(name, prefix) || a == name {
			return true
		}
	}
	return false
}

// dslOptions are the options the runs' workflows are compiled with.
func (a *App) dslOptions() dsl.Options {
	return dsl.Options{Env: a.workflowEnv(a.workflowAllow, a.workflowSecrets)}
}

// printEnvRefs says what each ${NAME:-default} of a workflow compiled to,
// and from where: the default, or a variable of this environment.
func printEnvRefs(w io.Writer, file string, refs []dsl.EnvRef, withEnv bool) {
	for _, r := range refs {
		where := "workflow"
		if r.Node != "" {
			where = "node " + r.Node
		}
		from := "its default"
		switch {
		case len(r.Read) > 0:
			from = "from " + strings.Join(r.Read, ", ")
		case withEnv:
			from = "its default: " + strings.Join(r.Names, ", ") + " unset, or not allowed by ITERION_WORKFLOW_ENV / workflow_env"
		}
		fmt.Fprintf(w, "%s: %s: %s %s = %q (%s)\n", file, where, r.Property, r.Raw, r.Value, from)
	}
}
