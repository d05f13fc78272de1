package slack

import (
	"context"
	"fmt"
	"slices"
	"strings"

	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/engine"
)

// RepoPermissions is the check a PR answer gets, for answers from Slack
// to a repository's runs (*github.Service has it): write permission on
// the repository, asked live, or its .iterion.yml's answerers.
type RepoPermissions interface {
	MayAnswer(ctx context.Context, run *engine.Run, login string) (bool, error)
}

// Links are the links people made from their Slack account to their
// GitHub account, by signing in to GitHub (see Linker).
type Links interface {
	// Link returns the GitHub login linked to a Slack user of team, ""
	// when there is none.
	Link(ctx context.Context, team, user string) (string, error)
}

// People says who a Slack user is on GitHub, and what they may do. A
// Slack user is a GitHub account only by an explicit mapping, never by a
// name or an e-mail address that looks alike: a link the person made by
// signing in to GitHub, or the server's static map (for small teams and
// tests). Then a run of a repository takes the repository's own check
// (RepoPermissions), and any other run (started from Slack, the API or a
// schedule) the server's list of GitHub logins (slack.allowed).
type People struct {
	static  map[string]string // Slack user id → GitHub login
	reverse map[string]string // GitHub login → Slack user id
	allowed []string
	repo    RepoPermissions
	links   Links
	// linkURL makes the address that links a Slack user's account (the
	// Linker's); nil when people cannot link their own, and an admin maps
	// them.
	linkURL func(team, user string) string
}

// PeopleOptions configure People; every field is optional.
type PeopleOptions struct {
	// Users maps Slack user ids (U…) to GitHub logins.
	Users map[string]string
	// Allowed are the GitHub logins that may start runs from Slack and
	// answer the questions of runs no repository covers.
	Allowed []string
	// Repo checks answers to a repository's runs; nil refuses them (no
	// GitHub App to ask).
	Repo RepoPermissions
	// Links are the links people made; nil means none.
	Links Links
	// LinkURL makes the address that links a Slack user's account
	// (Linker.URL); nil means people cannot link their own accounts.
	LinkURL func(team, user string) string
}

// NewPeople returns the People o describes.
func NewPeople(o PeopleOptions) *People {
	p := &People{static: map[string]string{}, reverse: map[string]string{}, allowed: o.Allowed, repo: o.Repo, links: o.Links, linkURL: o.LinkURL}
	for user, login := range o.Users {
		p.static[user] = login
		p.reverse[strings.ToLower(login)] = user
	}
	return p
}

// Login returns the GitHub login of a Slack user of team: linked, else
// mapped by the server; "" when neither.
func (p *People) Login(ctx context.Context, team, user string) (string, error) {
	if p.links != nil {
		login, err := p.links.Link(ctx, team, user)
		if err != nil || login != "" {
			return login, err
		}
	}
	return p.static[user], nil
}

// SlackUser returns the Slack user mapped to a GitHub login, "" when
// none is known, so a card can name the person as Slack shows them.
func (p *People) SlackUser(login string) string { return p.reverse[strings.ToLower(login)] }

// unlinked is the word to a Slack user of team iterion cannot tell on
// GitHub.
func (p *People) unlinked(team, user string) string {
	if p.linkURL != nil {
		return fmt.Sprintf("iterion does not know your GitHub account yet, so it cannot tell whether you may do this. <%s|Link your GitHub account> (you sign in to GitHub once; the link is good for 10 minutes, or type `/iterion link` for a new one), then try again.", p.linkURL(team, user))
	}
	return fmt.Sprintf("iterion does not know your GitHub account, so it cannot tell whether you may do this. Ask the server's admin to add `%s: <your GitHub login>` under `slack.users` in its configuration.", user)
}

// mayAnswer says why login may not answer run's questions, "" when it
// may.
func (p *People) mayAnswer(ctx context.Context, run *engine.Run, login string) (string, error) {
	if o, ok := ghbot.OriginOf(run); ok && o.Repo != "" {
		if p.repo == nil {
			return fmt.Sprintf("run `%s` belongs to %s, and this server has no GitHub App to check permissions on it.", run.ID, o.Repo), nil
		}
		ok, err := p.repo.MayAnswer(ctx, run, login)
		if err != nil || ok {
			return "", err
		}
		return fmt.Sprintf("only people with write permission on %s, or listed under `answerers` in its .iterion.yml, can answer its questions; you are GitHub @%s, so your answer was not recorded.", o.Repo, login), nil
	}
	if slices.Contains(p.allowed, login) {
		return "", nil
	}
	return fmt.Sprintf("only the GitHub accounts listed under `slack.allowed` in the server's configuration can answer the questions of run `%s`; you are GitHub @%s, so your answer was not recorded.", run.ID, login), nil
}

// mayRun says why login may not start runs from Slack, "" when it may.
func (p *People) mayRun(login string) string {
	if slices.Contains(p.allowed, login) {
		return ""
	}
	return fmt.Sprintf("only the GitHub accounts listed under `slack.allowed` in the server's configuration can start runs from Slack; you are GitHub @%s.", login)
}

// who says who may answer run's questions, for its question messages.
func (p *People) who(run *engine.Run) string {
	if o, ok := ghbot.OriginOf(run); ok && o.Repo != "" {
		return "people with write permission on " + escape(o.Repo) + " (or its answerers)"
	}
	if len(p.allowed) == 0 {
		return "nobody from Slack (`slack.allowed` is empty)"
	}
	var names []string
	for i, l := range p.allowed {
		if i == 5 {
			names = append(names, fmt.Sprintf("%d more", len(p.allowed)-5))
			break
		}
		names = append(names, "@"+escape(l))
	}
	return "GitHub " + strings.Join(names, ", ")
}

// name is how a message names who answered: the Slack user linked to
// the GitHub login when there is one ("<@U1> (GitHub @ana)"), else the
// login.
func (p *People) name(login, via string) string {
	if login == "" {
		return "someone"
	}
	if u := p.SlackUser(login); u != "" && via == "slack" {
		return fmt.Sprintf("<@%s> (GitHub @%s)", u, escape(oneLine(login, 60)))
	}
	return "@" + escape(oneLine(login, 60))
}
