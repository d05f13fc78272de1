package delivery

import "strings"

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
	case "cron":
		return "a schedule"
	case "":
		return "an unknown channel"
	}
	return via
}

// ViaList names channels in words, joined by "or": "GitHub or the admin
// page", as a question kept to its answer_on channels says where it is
// answered.
func ViaList(channels []string) string {
	words := make([]string, len(channels))
	for i, ch := range channels {
		words[i] = ViaWords(ch)
	}
	return strings.Join(words, " or ")
}
