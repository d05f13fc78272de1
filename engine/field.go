package engine

import "github.com/iterion-bot/iterion/dsl"

// CheckAnswer converts one text answer of a human node's form to its
// field's type, or says why it does not fit, naming what the field
// accepts. It is the check Answer applies to a form's text answers, so a
// front end that asks field by field (the CLI's prompt) can ask again at
// once, with the message every channel gives.
func CheckAnswer(text string, f dsl.Field) (any, error) { return coerce(text, f) }
