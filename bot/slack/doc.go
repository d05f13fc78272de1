// Package slack is iterion's Slack channel, on the channel-neutral
// delivery core of bot/delivery and on slack-go.
//
// What comes in, over one of two transports the configuration chooses:
// the Events API, interactivity and the slash command over HTTP (the
// Service's Events, Interactive and Commands handlers, each a
// delivery.Intake), where every request's signature and timestamp are
// checked as its body arrives, before any of it is parsed; or Socket Mode
// (socket.go), a WebSocket the server opens, behind any firewall. Either
// way the taker (intake.go) makes of each request a delivery to store (a
// person's reply in a run's thread, keyed by its channel and ts; an
// option clicked; a valid modal submission; a command, keyed by its
// trigger id) and the answer Slack needs within the request: the
// url_verification challenge, the modal a click opens (views.open, with a
// trigger id valid once for 3 seconds), a modal's errors shown beside
// its inputs (response_action: errors). A delivery is stored before the
// request is acknowledged, so nothing acknowledged is lost, and a retry
// is the same delivery, so it has no second effect. The delivery worker
// hands each stored delivery to the Handler (handler.go), which checks
// the answer again (the question still pending; the Slack user, mapped
// to a GitHub account by People, one who may answer) and records it
// through the engine's door, or runs the command; what a person must
// hear is said to them alone.
//
// What goes out: the Relay (relay.go) performs the engine's outbox rows
// for Slack: one card per run in its channel, updated in place, each
// question a reply in the card's thread with its buttons (render.go),
// updated when answered anywhere, and a thread reply saying who answered
// and where. Every message carries metadata naming what it is, and an
// intent is recorded before each post, so a post whose record a crash
// lost is found again instead of posted twice. Posts in a channel are
// paced, and Slack's 429 postpones the row by its Retry-After (client.go).
// At start, replies written in threads while the server was down are read
// back and taken in (reconcile.go).
//
// Service wires it all for a server; every constructor takes its Options.
package slack
