package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/iterion-bot/iterion/dsl"
)

// validators compiles each output schema of a run's workflow to a JSON
// Schema validator once, for that run: the IR is immutable, so the schema
// pointer is the key, and the cache goes with the run (a process-global
// map would keep every schema of every workflow ever compiled). Its zero
// value is ready to use.
type validators struct {
	mu sync.Mutex
	m  map[*dsl.Schema]*jsonschema.Schema
}

func (v *validators) get(s *dsl.Schema) (*jsonschema.Schema, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if sch, ok := v.m[s]; ok {
		return sch, nil
	}
	c := jsonschema.NewCompiler()
	url := "mem:///schemas/" + s.Name + ".json"
	if err := c.AddResource(url, s.JSONSchema()); err != nil {
		return nil, fmt.Errorf("loading schema %s: %w", s.Name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compiling schema %s: %w", s.Name, err)
	}
	if v.m == nil {
		v.m = map[*dsl.Schema]*jsonschema.Schema{}
	}
	v.m[s] = sch
	return sch, nil
}

var printer = message.NewPrinter(language.English)

// validate checks an output against its schema with a JSON Schema
// validator and names each offending field.
func (v *validators) validate(s *dsl.Schema, out map[string]any) error {
	sch, err := v.get(s)
	if err != nil {
		return err
	}
	err = sch.Validate(map[string]any(out))
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err
	}
	var problems []string
	var leaves func(e *jsonschema.ValidationError)
	leaves = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			where := "output"
			if len(e.InstanceLocation) > 0 {
				where = fmt.Sprintf("field %q", strings.Join(e.InstanceLocation, "."))
			}
			problems = append(problems, where+": "+e.ErrorKind.LocalizedString(printer))
			return
		}
		for _, c := range e.Causes {
			leaves(c)
		}
	}
	leaves(verr)
	slices.Sort(problems)
	return errors.New(strings.Join(slices.Compact(problems), "; "))
}
