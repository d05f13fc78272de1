package dsl

import (
	"github.com/iterion-bot/iterion/engine/permission"
)

// permissionDecl is a permission: mode and allow/ask/deny rule lists as
// one block (the workflow, or a node) declares them.
type permissionDecl struct {
	mode    permission.Mode
	modeSet bool
	// lists holds the allow, ask and deny rules; a list declared empty is
	// as if not declared (a node list replaces the workflow's only when it
	// says something).
	lists [3][]permission.Rule
	// declared reports which lists said something.
	declared [3]bool
	// at is where the rules start, for warnings.
	at *Property
}

var permissionLists = [3]string{"allow", "ask", "deny"}

// permissionProps reads a block's permission: and rule lists.
func (c *compiler) permissionProps(props map[string]*Property, owner string) permissionDecl {
	var d permissionDecl
	if p := props["permission"]; p != nil {
		if s, ok := c.str(p); ok {
			m, err := permission.ParseMode(s)
			if err != nil || s == "" {
				c.errorAtValue(p.Value, BadPermission, "use off, ask or deny", "invalid permission %q on %s", s, owner)
			} else {
				d.mode, d.modeSet = m, true
			}
		}
	}
	for i, name := range permissionLists {
		p := props[name]
		if p == nil {
			continue
		}
		if d.at == nil {
			d.at = p
		}
		for _, s := range c.stringList(p) {
			r, err := permission.ParseRule(s)
			if err != nil {
				c.errorAtValue(p.Value, BadPermission, `write a tool name ("Grep") or Tool(pattern) ("Bash(go test:*)", "Read(pkg/**)")`, "%s: %v", name, err)
				continue
			}
			d.lists[i] = append(d.lists[i], r)
		}
		d.declared[i] = len(d.lists[i]) > 0
	}
	return d
}

// resolvePermission is a node's policy: its mode, else the workflow's;
// each rule list its own when it declares one, else the workflow's. nil
// when neither says anything. modeSet reports whether a mode was written
// (the server's default applies otherwise).
func resolvePermission(wf, node permissionDecl) (p *permission.Policy, modeSet bool) {
	pol := &permission.Policy{Mode: wf.mode}
	modeSet = wf.modeSet
	if node.modeSet {
		pol.Mode, modeSet = node.mode, true
	}
	lists := [3]*[]permission.Rule{&pol.Allow, &pol.Ask, &pol.Deny}
	any := modeSet
	for i := range lists {
		switch {
		case node.declared[i]:
			*lists[i] = node.lists[i]
		case wf.declared[i]:
			*lists[i] = wf.lists[i]
		}
		any = any || len(*lists[i]) > 0
	}
	if !any {
		return nil, false
	}
	return pol, modeSet
}

// compilePermissions resolves every agent's and judge's policy once the
// workflow's own declaration is read, and warns where a declaration can
// never apply.
func (c *compiler) compilePermissions() {
	wf := c.wfPermission
	for _, n := range c.w.Nodes {
		node := c.nodePermission[n.ID]
		if n.LLM == nil {
			continue
		}
		n.LLM.Permission, n.LLM.PermissionModeSet = resolvePermission(wf, node)
		p := n.LLM.Permission
		if p != nil && p.Mode == permission.Off && len(p.Allow) > 0 && len(p.Ask) == 0 && len(p.Deny) == 0 && n.LLM.PermissionModeSet {
			at := node.at
			if at == nil {
				at = wf.at
			}
			if at != nil {
				start, end := at.Key.Start, at.Key.End
				c.warnf(start, end, PermissionRulesInert, "set permission: ask or deny, or remove the allow rules",
					"the allow rules of %s %q never apply: its permission is off, so everything is allowed", n.Kind, n.ID)
			}
		}
	}
}

// toolPermission warns that permission: on a tool node changes nothing: a
// tool runs its fixed command, no agent decides what it calls.
func (c *compiler) toolPermission(n *Node, p *Property) {
	if p == nil {
		return
	}
	c.warnf(p.Key.Start, p.Key.End, ToolPermissionInert, "remove it; gate the agent and judge nodes instead",
		"permission: on tool %q is not enforced: a tool node runs its fixed command", n.ID)
}
