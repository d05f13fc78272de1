package dsl

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// sandbox: declarations, on the workflow and on agents, judges and tools.
// Upstream's forms are read and mapped onto this server's drivers: auto is
// the configured driver, none the host, a block with image: docker. What a
// workflow file may not decide here (mounts, the user, building images) is
// refused with E090 and a reason, never ignored.

// sandboxModes are the short forms and the drivers they name. none is
// upstream's spelling of the opt-out, host ours.
var sandboxModes = map[string]SandboxMode{
	"auto": SandboxAuto, "none": SandboxHost, "host": SandboxHost, "bwrap": SandboxBwrap, "docker": SandboxDocker,
}

// sandboxModeList lists the short forms in the order messages give them.
var sandboxModeList = []string{"auto", "none", "bwrap", "docker", "host"}

// sandboxKeys are the keys of a sandbox block, supported or not.
var sandboxKeys = []string{"mode", "image", "network", "env", "host_state",
	"build", "mounts", "user", "workspace_folder", "post_create"}

// sandboxRefused are upstream sandbox keys this implementation does not
// honour: why, and what to do instead.
var sandboxRefused = map[string][2]string{
	"build": {"building images is not supported by this implementation",
		`build and push the image elsewhere, then name it with image: "…"`},
	"mounts": {"mounts are the operator's: they are set in the serve configuration, never by a workflow file",
		"remove mounts:; the run's workspace is mounted for you"},
	"user": {"the sandbox runs processes as the server's unprivileged user; a workflow file cannot choose another",
		"remove user:"},
	"workspace_folder": {"the sandbox driver decides where the workspace is mounted, and processes start in it",
		"remove workspace_folder: and use paths relative to the workspace"},
	"post_create": {"post_create: is not run by this implementation",
		"remove it, and run the setup in a tool node before the nodes that need it"},
}

var (
	// envName is a portable environment variable name.
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// imageRef is the shape of a docker image reference: no spaces, no
	// leading dash (it must never read as a flag), nothing to expand.
	imageRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@-]*$`)
)

// maxImageRef bounds an image reference; docker's own limit is lower.
const maxImageRef = 512

// sandboxDecl compiles a sandbox: property. owner names the declaration
// in messages (`tool "t"`, `workflow "w"`) and procs the processes it
// governs. It returns nil when p is nil or has no value; otherwise a
// Sandbox, partial when there are errors.
//
//	sandbox    = mode-name | sandbox-block .
//	mode-name  = "auto" | "none" | "bwrap" | "docker" | "host" .
//	sandbox-block = INDENT { sandbox-key } DEDENT | "{" … "}" .
//	sandbox-key = "mode" ":" ( mode-name | "inline" )
//	            | "image" ":" string
//	            | "network" ":" ( "none" | "open" | "model_only" | network-block )
//	            | "env" ":" env-block
//	            | "host_state" ":" "none"
//	            | refused-key ":" value .
func (c *compiler) sandboxDecl(p *Property, owner, procs string) *Sandbox {
	if p == nil || p.Value == nil {
		return nil
	}
	_, end := p.Value.Span()
	sb := &Sandbox{Range: Range{File: c.f.Name, Start: p.Key.Start, End: end}}
	var modeVal Value // where the mode is written, when it is
	switch v := p.Value.(type) {
	case *StringLit, *WordLit:
		name, _ := stringValue(v)
		sb.Mode, modeVal = c.sandboxMode(v, name, owner, false), v
	case *BlockLit:
		modeVal = c.sandboxBlock(sb, p, v.Props, owner)
	case *MapLit:
		modeVal = c.sandboxBlock(sb, p, v.Entries, owner)
	default:
		c.errorAtValue(v, BadSandbox, "write sandbox: auto, none, bwrap, docker or host, or an indented block with image:",
			"sandbox of %s must be a mode name or a block", owner)
	}
	if sb.Mode == SandboxHost && modeVal != nil {
		name, _ := stringValue(modeVal)
		start, end := modeVal.Span()
		c.warnf(start, end, SandboxOnHost,
			"iterion serve refuses this file unless its operator allows host sandboxes; write auto instead to run in the server's sandbox",
			"sandbox: %s runs %s on the host, with the server's view of the machine", name, procs)
	}
	return sb
}

// sandboxMode resolves a mode name; inBlock allows inline (handled by the
// caller) among the suggestions.
func (c *compiler) sandboxMode(v Value, name, owner string, inBlock bool) SandboxMode {
	if m, ok := sandboxModes[name]; ok {
		return m
	}
	valid := sandboxModeList
	forms := "auto (the server's driver), none, bwrap, docker, host, or a block with image:"
	if inBlock {
		valid = append(valid[:len(valid):len(valid)], "inline")
		forms = "auto (the server's driver), none, bwrap, docker, host, or inline (with image:)"
	}
	hint := "use " + forms
	if near := c.suggest(name, valid); near != "" {
		hint = fmt.Sprintf("did you mean %q? The modes are %s", near, forms)
	}
	c.errorAtValue(v, BadSandbox, hint, "invalid sandbox mode %q for %s", name, owner)
	return SandboxInvalid
}

// sandboxBlock reads the block form and returns the value of its mode:
// (nil when there is none). Without mode: the block is upstream's mode
// inline: an image, run here by the docker driver.
func (c *compiler) sandboxBlock(sb *Sandbox, p *Property, entries []*Property, owner string) Value {
	byKey := map[string]*Property{}
	for _, e := range entries {
		k := e.Key
		if byKey[k.Name] != nil {
			if _, isMap := p.Value.(*MapLit); !isMap { // the parser reports a map's duplicates
				c.errorf(k.Start, k.End, ErrDuplicate, "keep one of them", "duplicate key %q in the sandbox of %s", k.Name, owner)
			}
			continue
		}
		byKey[k.Name] = e
		if !slices.Contains(sandboxKeys, k.Name) {
			hint := "the sandbox keys are mode, image, network, env and host_state"
			if near := c.suggest(k.Name, sandboxKeys); near != "" {
				hint = fmt.Sprintf("did you mean %q?", near)
			}
			c.errorf(k.Start, k.End, ErrUnknownProp, hint, "unknown key %q in the sandbox of %s", k.Name, owner)
		}
	}

	inline := true
	if mp := byKey["mode"]; mp != nil {
		inline = false
		if name, ok := c.str(mp); ok {
			if name == "inline" {
				inline = true
			} else {
				sb.Mode = c.sandboxMode(mp.Value, name, owner, true)
			}
		}
	}

	image, build := byKey["image"], byKey["build"]
	switch {
	case image != nil && build != nil:
		c.errorf(build.Key.Start, build.Key.End, BadSandbox,
			"keep image: (a prebuilt image) and remove build:, which this implementation does not support",
			"the sandbox of %s sets both image: and build:, which exclude each other", owner)
	case build != nil:
		c.refuseSandboxKey(build, owner)
	}
	for _, k := range []string{"mounts", "user", "workspace_folder", "post_create"} {
		if e := byKey[k]; e != nil {
			c.refuseSandboxKey(e, owner)
		}
	}

	switch {
	case image != nil:
		img := c.sandboxImage(image)
		switch {
		case inline || sb.Mode == SandboxDocker:
			sb.Mode, sb.Image = SandboxDocker, img
		case sb.Mode != SandboxInvalid:
			c.errorf(image.Key.Start, image.Key.End, BadSandbox,
				"write mode: docker, or leave mode: out (a block with image: is mode inline, run by docker)",
				"image: needs the docker driver, but the sandbox of %s has mode %s", owner, sb.Mode)
		}
	case inline && build == nil:
		at := p.Key
		hint := `add image: "…", or mode: auto to use the server's driver`
		if mp := byKey["mode"]; mp != nil {
			start, end := mp.Value.Span()
			c.errorf(start, end, BadSandbox, hint, "sandbox mode inline of %s needs image:", owner)
		} else {
			c.errorf(at.Start, at.End, BadSandbox, hint,
				"the sandbox block of %s has no mode: and no image:; without mode: a block is mode inline, which runs an image", owner)
		}
	}

	if np := byKey["network"]; np != nil {
		sb.Network = c.sandboxNetwork(np, sb.Mode, owner)
	}
	if ep := byKey["env"]; ep != nil {
		sb.Env = c.sandboxEnv(ep, owner)
	}
	if hp := byKey["host_state"]; hp != nil {
		c.hostState(hp, owner)
	}
	if mp := byKey["mode"]; mp != nil {
		return mp.Value
	}
	return nil
}

func (c *compiler) refuseSandboxKey(e *Property, owner string) {
	r := sandboxRefused[e.Key.Name]
	c.errorf(e.Key.Start, e.Key.End, ErrUnsupported, r[1], "sandbox %s: in %s is not supported: %s", e.Key.Name, owner, r[0])
}

// sandboxImage checks an image reference and returns it ("" when invalid).
func (c *compiler) sandboxImage(p *Property) string {
	s, ok := c.str(p)
	if !ok {
		return ""
	}
	if len(s) > maxImageRef || !imageRef.MatchString(s) {
		c.errorAtValue(p.Value, ErrInvalidValue, `name an image such as "python:3.12-bookworm" or "ghcr.io/org/tools@sha256:…"`,
			"invalid image reference %q", truncate(s, 80))
		return ""
	}
	return s
}

// sandboxNetwork reads network: a short none, open or model_only, or
// upstream's block, of which only mode: open (and our none and model_only)
// is supported.
//
//	network = mode | INDENT [ "mode" ":" mode ] DEDENT .
//	mode    = "none" | "open" | "model_only" | `"model-only"` .
func (c *compiler) sandboxNetwork(p *Property, mode SandboxMode, owner string) string {
	const refuseHint = "use network: open or model_only, or leave network: out for the default (no network; an agent CLI reaches its model only)"
	var entries []*Property
	switch v := p.Value.(type) {
	case *StringLit, *WordLit:
		return c.networkMode(p, mode, owner, refuseHint)
	case *BlockLit:
		entries = v.Props
	case *MapLit:
		entries = v.Entries
	case nil:
		return ""
	default:
		c.errorAtValue(v, ErrExpected, "write network: none, network: model_only or network: open", "network of the sandbox of %s must be none, model_only, open or a block", owner)
		return ""
	}
	var modeProp *Property
	seen := map[string]bool{}
	for _, e := range entries {
		k := e.Key
		if seen[k.Name] {
			if _, isMap := p.Value.(*MapLit); !isMap {
				c.errorf(k.Start, k.End, ErrDuplicate, "keep one of them", "duplicate key %q in network of the sandbox of %s", k.Name, owner)
			}
			continue
		}
		seen[k.Name] = true
		switch k.Name {
		case "mode":
			modeProp = e
		case "preset", "rules":
			c.errorf(k.Start, k.End, ErrUnsupported, refuseHint,
				"network %s: in the sandbox of %s is not supported: this implementation has no allow or deny lists", k.Name, owner)
		default:
			hint := "the network keys are mode, preset and rules; only mode: open is supported"
			if near := c.suggest(k.Name, []string{"mode", "preset", "rules"}); near != "" {
				hint = fmt.Sprintf("did you mean %q?", near)
			}
			c.errorf(k.Start, k.End, ErrUnknownProp, hint, "unknown key %q in network of the sandbox of %s", k.Name, owner)
		}
	}
	if modeProp == nil {
		if !seen["preset"] && !seen["rules"] {
			c.errorf(p.Key.Start, p.Key.End, ErrMissingProp, "write network: open, or remove the empty block",
				"network of the sandbox of %s has no mode:", owner)
		}
		return ""
	}
	return c.networkMode(modeProp, mode, owner, refuseHint)
}

// networkMode reads one network mode value: none, open or model_only
// (also written "model-only", as the issue tracker and the engine name it).
func (c *compiler) networkMode(p *Property, mode SandboxMode, owner, refuseHint string) string {
	s, ok := c.str(p)
	if !ok {
		return ""
	}
	written := s
	if s == "model_only" {
		s = SandboxNetworkModelOnly
	}
	switch s {
	case SandboxNetworkOpen:
		return s
	case SandboxNetworkNone, SandboxNetworkModelOnly:
		if mode == SandboxHost {
			c.errorAtValue(p.Value, ErrInvalidValue, "remove network:, or use a sandbox (auto, bwrap or docker) to cut the network off",
				"network: %s cannot be enforced for %s: processes on the host share the server's network", written, owner)
			return ""
		}
		return s
	case "allowlist", "denylist":
		c.errorAtValue(p.Value, ErrUnsupported, refuseHint,
			"network mode %s in the sandbox of %s is not supported: this implementation has no allow or deny lists", s, owner)
		return ""
	}
	valid := []string{SandboxNetworkNone, SandboxNetworkOpen, "model_only"}
	hint := "use none, model_only or open"
	if near := c.suggest(s, valid); near != "" {
		hint = fmt.Sprintf("did you mean %q? (none, model_only or open)", near)
	}
	c.errorAtValue(p.Value, ErrInvalidValue, hint, "invalid network mode %q in the sandbox of %s", s, owner)
	return ""
}

// sandboxEnv reads env: NAME: "value" lines. Values are literal: the
// server's environment never reaches a sandbox, and templates are not
// expanded here.
func (c *compiler) sandboxEnv(p *Property, owner string) map[string]string {
	var entries []*Property
	switch v := p.Value.(type) {
	case *BlockLit:
		entries = v.Props
	case *MapLit:
		entries = v.Entries
	case nil:
		return nil
	default:
		c.errorAtValue(v, ErrExpected, `indent one NAME: "value" line per variable under env:`, "env of the sandbox of %s must be a block", owner)
		return nil
	}
	env := map[string]string{}
	for _, e := range entries {
		k := e.Key
		if _, dup := env[k.Name]; dup {
			if _, isMap := p.Value.(*MapLit); !isMap {
				c.errorf(k.Start, k.End, ErrDuplicate, "keep one of them", "duplicate variable %q in env of the sandbox of %s", k.Name, owner)
			}
			continue
		}
		switch {
		case !envName.MatchString(k.Name):
			c.errorf(k.Start, k.End, ErrInvalidValue, "use letters, digits and _, not starting with a digit",
				"invalid environment variable name %q in the sandbox of %s", truncate(k.Name, 80), owner)
			continue
		case k.Name == "PATH" || k.Name == "HOME":
			c.errorf(k.Start, k.End, ErrInvalidValue, "remove it: the sandbox sets "+k.Name+" itself; pick another name for your own value",
				"environment variable %s is reserved: the sandbox driver sets it", k.Name)
			continue
		case strings.HasPrefix(k.Name, "ITERION_"):
			c.errorf(k.Start, k.End, ErrInvalidValue, "rename it: names starting with ITERION_ belong to the server",
				"environment variable %s is reserved: names starting with ITERION_ are the server's", k.Name)
			continue
		case codeEnv(k.Name):
			c.errorf(k.Start, k.End, ErrInvalidValue, "remove it: set it in the command itself (VAR=value cmd), where only the sandboxed command reads it",
				"environment variable %s makes programs load or run code it names, so a sandbox: env cannot set it", k.Name)
			continue
		}
		val, ok := envValue(e.Value)
		if !ok {
			if e.Value != nil {
				c.errorAtValue(e.Value, ErrExpected, fmt.Sprintf(`quote the value: %s: "…"`, k.Name), "env value of %s must be a string", k.Name)
			}
			continue
		}
		switch {
		case strings.Contains(val, "{{"):
			c.errorAtValue(e.Value, ErrUnsupported, "write the value itself; give run data to the node through its prompt or command",
				"env value of %s in the sandbox of %s holds a {{…}} reference: sandbox env values are literal and are not expanded", k.Name, owner)
			continue
		case strings.Contains(val, "${"):
			c.errorAtValue(e.Value, ErrUnsupported, "write the value itself; secrets belong in the operator's serve configuration, not in a workflow file",
				"env value of %s in the sandbox of %s holds ${…}: values are literal, and the server's environment never reaches a sandbox", k.Name, owner)
			continue
		case strings.ContainsRune(val, 0):
			c.errorAtValue(e.Value, ErrInvalidValue, "remove the NUL character", "env value of %s contains a NUL character, which no environment can hold", k.Name)
			continue
		}
		env[k.Name] = val
	}
	if len(env) == 0 {
		return nil
	}
	return env
}

// codeEnv reports whether the dynamic loader, a shell or the C library
// runs or loads code named by the variable k: a workflow's env must not
// set it for every process of a sandbox (a library shipped in a pull
// request's workspace would load everywhere).
func codeEnv(k string) bool {
	if strings.HasPrefix(k, "LD_") {
		return true
	}
	switch k {
	case "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "GCONV_PATH", "LOCPATH", "HOSTALIASES", "NLSPATH", "GETCONF_DIR", "MALLOC_TRACE", "RESOLV_HOST_CONF", "RES_OPTIONS":
		return true
	}
	return false
}

// envValue accepts a string, a bare word, a number or a bool, as written.
func envValue(v Value) (string, bool) {
	switch v := v.(type) {
	case *NumberLit:
		return v.Text, true
	case *BoolLit:
		return fmt.Sprint(v.Value), true
	}
	return stringValue(v)
}

// hostState reads host_state:. Nothing of the host's state (credentials,
// configuration) is ever copied into a sandbox, which is what none asks
// for; auto, which asks for it, is refused.
func (c *compiler) hostState(p *Property, owner string) {
	s, ok := c.str(p)
	if !ok {
		return
	}
	switch s {
	case "none":
	case "auto":
		c.errorAtValue(p.Value, ErrUnsupported, "remove it, or write host_state: none",
			"host_state: auto in the sandbox of %s is not supported: the server never copies host state (credentials, configuration) into a sandbox", owner)
	default:
		hint := "use none"
		if near := c.suggest(s, []string{"auto", "none"}); near != "" {
			hint = fmt.Sprintf("did you mean %q? (host_state: none is the one supported)", near)
		}
		c.errorAtValue(p.Value, ErrInvalidValue, hint, "invalid host_state %q in the sandbox of %s", s, owner)
	}
}
