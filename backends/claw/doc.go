// Package claw is iterion's own agent loop: it talks to model APIs
// directly (the Anthropic Messages API and OpenAI-compatible chat
// completions, through their official SDKs) and runs the tool loop itself,
// so the async-question protocol of ADR-081 is entirely under its control.
//
// A node's conversation is kept in a dialect-neutral form (Conversation)
// that the engine stores in the run's checkpoint when the agent asks a
// blocking question; the resumed node continues the same conversation,
// answering the pending tool call with the human's answer.
package claw
