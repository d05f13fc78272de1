// Package engine runs compiled workflows (dsl.Workflow): runs, their
// statuses and failure codes, human pauses and async questions, the inbox
// that delivers answers to an agent, the event stream, and the intents
// through which all of it is stored.
//
// The engine imports only dsl. It declares the small interfaces it needs
// (Store here; the backend interface with the scheduler) and the outer
// packages implement them: store on Badger, backends for the agents.
//
// The names, texts and shapes follow upstream iterion (ADR-081 and the
// reference spec): statuses such as paused_waiting_human, interaction ids
// <run>_<node>_async_<n>, event names such as human_input_requested, and the
// inbox message "[Answer to question <id>] Q: "…" — A: …".
package engine
