package engine_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/engine"
)

// ValidateAnswer refuses what Answer would refuse, field by field, by
// the question's own schema: a text for a question, each field of its
// type for a form, no field the form lacks.
func TestValidateAnswer(t *testing.T) {
	async := &engine.Interaction{ID: "q", Kind: engine.KindAsync, Questions: map[string]any{engine.QuestionKey: "Which?"}}
	form := &engine.Interaction{ID: "f", Kind: engine.KindBlocking, Questions: map[string]any{"approved": "", "count": "", "tag": ""},
		Fields: []engine.FormField{{Name: "approved", Type: "bool"}, {Name: "count", Type: "int"}, {Name: "tag", Type: "string", Enum: []string{"a", "b"}}}}
	one := &engine.Interaction{ID: "o", Kind: engine.KindBlocking, Questions: map[string]any{"reason": ""}, Fields: []engine.FormField{{Name: "reason", Type: "string"}}}
	tests := []struct {
		name   string
		ix     *engine.Interaction
		text   string
		fields map[string]any
		want   []string // the fields refused, in order
	}{
		{"a text answers a question", async, "MySQL", nil, nil},
		{"a blank text does not", async, "  ", nil, []string{engine.QuestionKey}},
		{"a form's fields of their types", form, "", map[string]any{"approved": "yes", "count": "3", "tag": "b"}, nil},
		{"each field wrong is named", form, "", map[string]any{"approved": "perhaps", "count": "3.5", "tag": "c", "extra": "x"}, []string{"approved", "count", "tag", "extra"}},
		{"a missing field", form, "", map[string]any{"approved": "no", "tag": "a"}, []string{"count"}},
		{"a text for a one-field form", one, "because", nil, nil},
		{"a text for a form of three", form, "yes", nil, []string{"approved", "count", "tag"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := engine.ValidateAnswer(tc.ix, tc.text, tc.fields)
			var got []string
			var bad *engine.InvalidAnswerError
			if errors.As(err, &bad) {
				for _, p := range bad.Problems {
					got = append(got, p.Field)
				}
			} else if err != nil {
				t.Fatalf("err = %v, want an *InvalidAnswerError or nil", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s", diff)
			}
		})
	}
	if err := engine.ValidateAnswer(form, "x", map[string]any{"count": "1"}); !errors.Is(err, engine.ErrTextAndFields) {
		t.Errorf("text and fields: %v, want ErrTextAndFields", err)
	}
}
