package dsl

import (
	"errors"
	"fmt"
	"strings"
)

// Environment references in property values. Upstream lets a workflow
// write a routing property as ${NAME} or ${NAME:-default}, defaults
// nesting (${A:-${B:-high}}): backend, default_backend, model,
// reasoning_effort and a node's timeout. The compiler reads such a value
// through Options.Env; without one (iterion validate) every reference
// takes its default, so a verdict depends on the file alone. A run reads
// only what the server allows (see the server's workflow_env).

// EnvRef is one property value that reads the environment, as compiled.
type EnvRef struct {
	// Node is the node's id, "" for the workflow's own property.
	Node     string
	Property string
	// Raw is the value as written, Value as compiled.
	Raw, Value string
	// Read are the variables whose values were used; the others took
	// their defaults.
	Read []string
	// Names are every variable the value names.
	Names []string
}

// MaxEnvDepth bounds the nesting of defaults, for hostile files.
const MaxEnvDepth = 16

// envProps are the properties whose values may read the environment.
var envProps = map[string]bool{"backend": true, "default_backend": true, "model": true, "reasoning_effort": true, "timeout": true}

// expandEnv resolves the ${NAME} and ${NAME:-default} references of s.
// lookup returns a variable's value and whether it may be read (nil reads
// none). ${NAME} alone of an unread variable is empty; ${NAME:-default}
// is the default when the variable is unread or empty. names collects
// every variable named, read the ones whose values were used. A lone '$'
// is kept as it is.
func expandEnv(s string, lookup func(string) (string, bool), names, read *[]string) (string, error) {
	out, rest, err := expandUntil(s, lookup, names, read, 0, false)
	if err != nil {
		return "", err
	}
	if rest != "" {
		return "", fmt.Errorf("unexpected %q", rest[:1])
	}
	return out, nil
}

// expandUntil expands s up to its end, or, inside a default, up to the
// '}' that closes it; it returns the expansion and what follows the '}'.
func expandUntil(s string, lookup func(string) (string, bool), names, read *[]string, depth int, inDefault bool) (string, string, error) {
	if depth > MaxEnvDepth {
		return "", "", fmt.Errorf("defaults nested more than %d deep", MaxEnvDepth)
	}
	var b strings.Builder
	for len(s) > 0 {
		if inDefault && s[0] == '}' {
			return b.String(), s, nil
		}
		if !strings.HasPrefix(s, "${") {
			b.WriteByte(s[0])
			s = s[1:]
			continue
		}
		s = s[2:]
		end := strings.IndexFunc(s, func(r rune) bool {
			return !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		})
		if end < 0 {
			return "", "", errors.New("a ${ is not closed with }")
		}
		name := s[:end]
		if name == "" || name[0] >= '0' && name[0] <= '9' {
			return "", "", fmt.Errorf("${%s…} names no variable (letters, digits and _, not starting with a digit)", name)
		}
		s = s[end:]
		*names = append(*names, name)
		var value string
		var ok bool
		if lookup != nil {
			value, ok = lookup(name)
		}
		switch {
		case strings.HasPrefix(s, "}"):
			s = s[1:]
			if ok {
				*read = append(*read, name)
			}
			b.WriteString(value)
		case strings.HasPrefix(s, ":-"):
			def, rest, err := expandUntil(s[2:], lookup, names, read, depth+1, true)
			if err != nil {
				return "", "", err
			}
			if !strings.HasPrefix(rest, "}") {
				return "", "", fmt.Errorf("${%s:-… is not closed with }", name)
			}
			s = rest[1:]
			if ok && value != "" {
				*read = append(*read, name)
				b.WriteString(value)
			} else {
				b.WriteString(def)
			}
		default:
			return "", "", fmt.Errorf("${%s must be followed by } or :-default}", name)
		}
	}
	if inDefault {
		return "", "", errors.New("a default is not closed with }")
	}
	return b.String(), "", nil
}

// envStr reads a string property that may reference the environment
// (envProps), and records the reference; node is "" for the workflow.
func (c *compiler) envStr(p *Property, node string) (string, bool) {
	s, ok := c.str(p)
	if !ok || !envProps[p.Key.Name] || !strings.Contains(s, "${") {
		return s, ok
	}
	var names, read []string
	v, err := expandEnv(s, c.opts.Env, &names, &read)
	if err != nil {
		c.errorAtValue(p.Value, ErrInvalidValue, "write ${NAME} or ${NAME:-default}", "%s: %v", p.Key.Name, err)
		return "", false
	}
	c.w.EnvRefs = append(c.w.EnvRefs, EnvRef{Node: node, Property: p.Key.Name, Raw: s, Value: v, Read: read, Names: names})
	return v, true
}
