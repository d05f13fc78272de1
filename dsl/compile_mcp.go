package dsl

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// mcp_server declarations and mcp: blocks. Upstream's rules: a server's
// transport decides what it needs (stdio a command, http and sse a url);
// the workflow's mcp: picks the servers every agent and judge uses, and a
// node's mcp: adds its own (servers:), drops some (disable:), or starts
// from none (inherit: false). Upstream also loads the project's .mcp.json;
// this implementation does not, so a server must be declared in the file.

// mcpServerName is the shape of a server name: it becomes part of tool
// names (mcp__<server>__<tool>), which model APIs restrict to letters,
// digits, '_' and '-', and "__" would make the split ambiguous.
var mcpServerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)

// maxMCPArgs bounds a stdio server's argument list, for hostile files.
const maxMCPArgs = 256

// mcpConfig is an mcp: block as read.
type mcpConfig struct {
	servers, disable []namedValue
	inherit          *bool
	autoload         *Property
}

// compileMCP compiles the mcp_server declarations, then the workflow's and
// each agent's and judge's mcp: block into the node's server list.
func (c *compiler) compileMCP() {
	c.w.mcp = map[string]*MCPServer{}
	for _, d := range c.f.Decls {
		if sd, ok := d.(*MCPServerDecl); ok {
			c.mcpServer(sd)
		}
	}
	var wfServers []string
	if c.wf != nil {
		for _, p := range c.wf.Props {
			if p.Key.Name == "mcp" {
				cfg := c.mcpBlock(p, fmt.Sprintf("workflow %q", c.wf.Name.Name), false)
				wfServers = applyMCP(nil, cfg)
				break
			}
		}
	}
	for _, d := range c.nodeOrder {
		n := c.w.nodes[d.Name.Name]
		if n == nil || n.LLM == nil || (n.Kind != NodeAgent && n.Kind != NodeJudge) {
			continue
		}
		var cfg *mcpConfig
		var at *Property
		for _, p := range d.Props {
			if p.Key.Name == "mcp" {
				at = p
				cfg = c.mcpBlock(p, fmt.Sprintf("%s %q", n.Kind, n.ID), true)
				break
			}
		}
		base := wfServers
		if cfg != nil && cfg.inherit != nil && !*cfg.inherit {
			base = nil
		}
		servers := applyMCP(base, cfg)
		if len(servers) > 0 && n.LLM.ReadOnly {
			start, end := d.Name.Start, d.Name.End
			if at != nil {
				start, end = at.Key.Start, at.Key.End
			}
			c.warnf(start, end, InertMCP, "drop readonly: true to give the node its MCP tools, or move the MCP work to another node",
				"%s %q is readonly, so it gets no MCP tools (%s): an MCP tool may change anything, and nothing tells which ones only read",
				n.Kind, n.ID, strings.Join(servers, ", "))
			servers = nil
		}
		n.LLM.MCPServers = servers
	}
}

// applyMCP returns base with cfg's servers added and its disabled ones
// removed, each name once, in order.
func applyMCP(base []string, cfg *mcpConfig) []string {
	out := slices.Clone(base)
	if cfg == nil {
		return out
	}
	for _, s := range cfg.servers {
		if !slices.Contains(out, s.name) {
			out = append(out, s.name)
		}
	}
	for _, s := range cfg.disable {
		out = slices.DeleteFunc(out, func(n string) bool { return n == s.name })
	}
	return out
}

// mcpServer compiles one mcp_server declaration.
//
//	mcp-server = "mcp_server" name ":" INDENT { mcp-prop } DEDENT .
//	mcp-prop   = "transport" ":" ( "stdio" | "http" | "sse" )
//	           | "command" ":" string | "args" ":" list
//	           | "url" ":" string | "env" ":" env-block
//	           | "auth" ":" auth-block .
func (c *compiler) mcpServer(d *MCPServerDecl) {
	name := d.Name.Name
	owner := fmt.Sprintf("mcp_server %q", name)
	end := d.Name.End
	if n := len(d.Props); n > 0 && d.Props[n-1].Value != nil {
		_, end = d.Props[n-1].Value.Span()
	}
	s := &MCPServer{Name: name, Range: Range{File: c.f.Name, Start: d.Kw.Start, End: end}}
	if prev := c.w.mcp[name]; prev != nil {
		c.errorf(d.Name.Start, d.Name.End, DuplicateMCPServer, "rename one of them, or merge them", "mcp_server %q declared more than once (first at %s)", name, prev.Range.Start)
		return
	}
	switch {
	case !mcpServerName.MatchString(name) || strings.Contains(name, "__"):
		c.errorf(d.Name.Start, d.Name.End, BadMCPServer, "use up to 32 letters, digits, '_' and '-', without \"__\": the name becomes part of the tool names mcp__<server>__<tool>",
			"invalid mcp_server name %q", truncate(name, 80))
	case name == "iterion" || strings.HasPrefix(name, "iterion_"):
		c.errorf(d.Name.Start, d.Name.End, BadMCPServer, "pick another name",
			"mcp_server name %q is reserved: iterion's own MCP servers are named so", name)
	}
	props := map[string]*Property{}
	for _, p := range d.Props {
		if props[p.Key.Name] == nil {
			props[p.Key.Name] = p
		}
	}
	if p := props["transport"]; p != nil {
		if i, ok := c.choice(p, mcpTransportNames[1:]); ok {
			s.Transport = MCPTransport(i + 1)
		}
	} else {
		c.errorf(d.Name.Start, d.Name.End, BadMCPServer, "add transport: stdio (with command:), http or sse (with url:)", "%s has no transport:", owner)
	}
	if p := props["command"]; p != nil {
		s.Command, _ = c.mcpEnvStr(p, owner)
	}
	if p := props["args"]; p != nil {
		list, ok := p.Value.(*ListLit)
		switch {
		case !ok:
			if p.Value != nil {
				c.errorAtValue(p.Value, ErrExpected, `write args: ["-y", "pkg"]`, "args of %s must be a list of strings", owner)
			}
		case len(list.Items) > maxMCPArgs:
			c.errorAtValue(p.Value, BadMCPServer, "pass fewer arguments", "%s has %d args, more than %d", owner, len(list.Items), maxMCPArgs)
		default:
			s.Args = []string{}
			for _, it := range list.Items {
				lit, isStr := it.(*StringLit)
				if !isStr {
					c.errorAtValue(it, ErrExpected, "quote each argument", "args of %s must be strings", owner)
					continue
				}
				v, _ := c.mcpEnvStr(&Property{Key: Ident{Name: "args", Start: p.Key.Start, End: p.Key.End}, Value: lit}, owner)
				s.Args = append(s.Args, v)
			}
		}
	}
	if p := props["url"]; p != nil {
		s.URL, _ = c.mcpEnvStr(p, owner)
	}
	if p := props["env"]; p != nil {
		s.Env = c.sandboxEnv(p, owner)
	}
	if p := props["auth"]; p != nil {
		c.mcpAuth(p, owner)
	}
	switch s.Transport {
	case MCPStdio:
		if props["command"] == nil {
			c.errorf(d.Name.Start, d.Name.End, BadMCPServer, `add command: "…", the program that serves MCP on its standard input and output`, "%s with transport stdio must set command:", owner)
		} else if s.Command == "" {
			c.errorAtValue(props["command"].Value, BadMCPServer, "name the program to start", "%s has an empty command:", owner)
		}
		if p := props["url"]; p != nil {
			c.errorf(p.Key.Start, p.Key.End, BadMCPServer, "remove url:, or use transport: http", "%s with transport stdio cannot set url:", owner)
		}
	case MCPHTTP, MCPSSE:
		if props["url"] == nil {
			c.errorf(d.Name.Start, d.Name.End, BadMCPServer, `add url: "https://…"`, "%s with transport %s must set url:", owner, s.Transport)
		} else if s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			c.errorAtValue(props["url"].Value, BadMCPServer, `write an http:// or https:// URL`, "url of %s is not an http(s) URL: %q", owner, truncate(s.URL, 80))
		}
		for _, k := range []string{"command", "args", "env"} {
			if p := props[k]; p != nil {
				c.errorf(p.Key.Start, p.Key.End, BadMCPServer, "remove "+k+":, or use transport: stdio", "%s with transport %s cannot set %s:", owner, s.Transport, k)
			}
		}
	}
	c.w.MCPServers = append(c.w.MCPServers, s)
	c.w.mcp[name] = s
}

// mcpEnvStr reads a string of an mcp_server that may reference the
// environment (${NAME}, ${NAME:-default}), as upstream resolves its
// command and url at compile time; the reference is recorded.
func (c *compiler) mcpEnvStr(p *Property, owner string) (string, bool) {
	lit, ok := p.Value.(*StringLit)
	if !ok {
		if p.Value != nil {
			c.errorAtValue(p.Value, ErrExpected, fmt.Sprintf(`quote it: %s: "…"`, p.Key.Name), "%s of %s must be a quoted string", p.Key.Name, owner)
		}
		return "", false
	}
	s := lit.Value
	if strings.ContainsRune(s, 0) {
		c.errorAtValue(p.Value, BadMCPServer, "remove the NUL character", "%s of %s contains a NUL character", p.Key.Name, owner)
		return "", false
	}
	if !strings.Contains(s, "${") {
		return s, true
	}
	var names, read []string
	v, err := expandEnv(s, c.opts.Env, &names, &read)
	if err != nil {
		c.errorAtValue(p.Value, ErrInvalidValue, "write ${NAME} or ${NAME:-default}", "%s of %s: %v", p.Key.Name, owner, err)
		return "", false
	}
	c.w.EnvRefs = append(c.w.EnvRefs, EnvRef{Property: p.Key.Name + " of " + owner, Raw: s, Value: v, Read: read, Names: names})
	return v, true
}

// mcpAuth reads auth:. Upstream wires only type oauth2 (C038 otherwise),
// whose authorization-code login needs a person at a browser on the
// machine running iterion; a server has none, so it is refused here.
func (c *compiler) mcpAuth(p *Property, owner string) {
	var entries []*Property
	switch v := p.Value.(type) {
	case *BlockLit:
		entries = v.Props
	case *MapLit:
		entries = v.Entries
	case nil:
		return
	default:
		c.errorAtValue(v, ErrExpected, "indent type:, auth_url:, token_url:, client_id: and scopes: under auth:", "auth of %s must be a block", owner)
		return
	}
	for _, e := range entries {
		if e.Key.Name != "type" {
			continue
		}
		if t, ok := c.str(e); ok && t != "oauth2" {
			c.errorAtValue(e.Value, MCPAuthType, `remove auth:, or write type: "oauth2"`, "unsupported auth type %q in %s: only oauth2 is wired", t, owner)
			return
		}
	}
	c.errorf(p.Key.Start, p.Key.End, ErrUnsupported, "remove auth: and use a server that needs no login, or run this workflow with upstream iterion",
		"auth: in %s is not supported by this implementation: an OAuth login needs a person at a browser on the machine that runs iterion", owner)
}

// mcpBlock reads an mcp: block of a workflow or (node) an agent or judge.
//
//	mcp-block = INDENT { "servers" ":" list | "disable" ":" list
//	          | "inherit" ":" bool | "autoload_project" ":" bool } DEDENT .
func (c *compiler) mcpBlock(p *Property, owner string, node bool) *mcpConfig {
	var entries []*Property
	switch v := p.Value.(type) {
	case *BlockLit:
		entries = v.Props
	case *MapLit:
		entries = v.Entries
	case nil:
		return nil
	default:
		c.errorAtValue(v, ErrExpected, "indent servers: [a, b] under mcp:", "mcp of %s must be a block", owner)
		return nil
	}
	cfg := &mcpConfig{}
	seen := map[string]bool{}
	for _, e := range entries {
		k := e.Key
		if seen[k.Name] {
			if _, isMap := p.Value.(*MapLit); !isMap {
				c.errorf(k.Start, k.End, ErrDuplicate, "keep one of them", "duplicate key %q in mcp of %s", k.Name, owner)
			}
			continue
		}
		seen[k.Name] = true
		switch k.Name {
		case "servers", "disable":
			list := c.mcpNames(e, owner)
			if k.Name == "servers" {
				cfg.servers = list
			} else {
				cfg.disable = list
			}
		case "inherit":
			if !node {
				c.errorf(k.Start, k.End, ErrUnknownProp, "inherit: belongs in a node's mcp: block", "inherit: in the mcp of %s: a workflow inherits from nothing", owner)
				continue
			}
			if b, ok := c.boolProp(e); ok {
				cfg.inherit = &b
			}
		case "autoload_project":
			if b, ok := c.boolProp(e); ok && b {
				c.warnf(k.Start, k.End, InertMCP, "declare the servers the workflow uses with mcp_server, and list them under servers:",
					"autoload_project: true in %s does nothing here: the project's .mcp.json is not loaded", owner)
			}
			cfg.autoload = e
		default:
			hint := "the mcp keys are " + strings.Join(mcpConfigKeys, ", ")
			if near := c.suggest(k.Name, mcpConfigKeys); near != "" {
				hint = fmt.Sprintf("did you mean %q?", near)
			}
			c.errorf(k.Start, k.End, ErrUnknownProp, hint, "unknown key %q in mcp of %s", k.Name, owner)
		}
	}
	return cfg
}

// mcpNames reads a list of server names, each of which must be declared.
func (c *compiler) mcpNames(p *Property, owner string) []namedValue {
	var items []Value
	switch v := p.Value.(type) {
	case *ListLit:
		items = v.Items
	case *WordLit, *StringLit:
		items = []Value{v}
	case nil:
		return nil
	default:
		c.errorAtValue(v, ErrExpected, fmt.Sprintf("write %s: [a, b]", p.Key.Name), "%s of the mcp of %s must be a list of server names", p.Key.Name, owner)
		return nil
	}
	var out []namedValue
	for _, it := range items {
		name, ok := stringValue(it)
		start, end := it.Span()
		if !ok {
			c.errorAtValue(it, ErrExpected, "list server names", "%s of the mcp of %s must be server names", p.Key.Name, owner)
			continue
		}
		if c.w.mcp[name] == nil {
			hint := fmt.Sprintf("declare it: mcp_server %s: (this implementation does not read the project's .mcp.json)", name)
			if near := c.suggest(name, keys(c.w.mcp)); near != "" {
				hint = fmt.Sprintf("did you mean %q?", near)
			}
			c.errorf(start, end, UnknownMCPServer, hint, "the mcp of %s names unknown MCP server %q", owner, name)
			continue
		}
		out = append(out, namedValue{name: name, start: start, end: end})
	}
	return out
}
