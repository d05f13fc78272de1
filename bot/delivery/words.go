package delivery

// ViaWords names the channel an answer came through as people read it,
// after "via": "via GitHub", "via the admin page". Every channel says it
// the same way.
func ViaWords(via string) string {
	switch via {
	case "github":
		return "GitHub"
	case "slack":
		return "Slack"
	case "page":
		return "the admin page"
	case "cli":
		return "the command line"
	case "api":
		return "the REST API"
	case "timer":
		return "its timer"
	case "":
		return "an unknown channel"
	}
	return via
}
