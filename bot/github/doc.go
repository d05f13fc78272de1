// Package github is iterion's GitHub channel, on the channel-neutral
// delivery core of bot/delivery.
//
// What comes in: a webhook is taken in by bot/delivery's intake, with
// GitHub's side here (webhook.go): X-Hub-Signature-256 verified as the
// body arrives, the delivery keyed by X-GitHub-Delivery, only the events
// the App acts on and payloads naming an installation stored, and only
// then acknowledged; the delivery worker hands each stored delivery to
// the Handler. The Handler decodes it (events.go; names that are no
// GitHub names are refused there), reads the repository's .iterion.yml
// from the default branch, and hands each `/iterion` command of a
// comment (commands.go parses them) to its own handler: run
// (command_run.go), answer and quote replies (command_answer.go), cancel
// (command_cancel.go), status and help (command_status.go). Each reads
// and acts through the few interfaces it names, and returns an outcome:
// the reply's words, a reaction, the run it started. Runs asked for while
// another runs on the PR wait in its queue (prqueue.go); the Launcher
// checks the PR's head out and starts the run through the engine's doors.
//
// What goes out: the engine's outbox rows are performed by the Relay
// (outbox.go, status.go): a status comment and a check run per run, a
// comment per question, edited when answered. Every comment carries a
// marker, so nothing is posted twice across crashes; the Commenter paces
// writes per installation, and the App's transport reads GitHub's rate
// limits from its headers (ratelimit.go). An installation GitHub mints no
// token for holds its work until an installation event releases it
// (installations.go).
//
// Service wires it all for a server; every constructor takes its Options.
package github
