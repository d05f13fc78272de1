package github

import "github.com/iterion-bot/iterion/bot/delivery"

// The GitHub channel's deliveries are handled by the channel-neutral
// worker of bot/delivery; these names are the channel's.

// Failpoints of the GitHub channel, for crash tests.
const (
	// FailDeliveryHandling: a delivery acknowledged to GitHub is about to
	// be handled.
	FailDeliveryHandling = delivery.FailDeliveryHandling
	// FailOutboxPerformed: an outbox row's posts are made, the row not yet
	// marked done.
	FailOutboxPerformed = "github-outbox-performed"
)

// MaxAttempts bounds how often a delivery is tried while handling keeps
// failing for a while; GitHub's own rate limits are waited out.
const MaxAttempts = delivery.MaxAttempts
