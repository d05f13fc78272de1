package github

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// MaxCommentBytes caps a comment body. GitHub's limit is 65,536 and
// reports disagree on the unit; bytes are safe under every reading.
const MaxCommentBytes = 65536

// truncatedNote ends a comment cut to fit.
const truncatedNote = "\n\n… (cut to fit GitHub's comment limit; the full text is on iterion's admin page)"

// RetryLater is the error of a call GitHub asked us to repeat later (a
// rate limit, an outage); the worker and the relay postpone the work by
// After instead of failing it (delivery.RetryLater).
type RetryLater = delivery.RetryLater

// Commenter posts PR comments for the outbox worker. Each comment carries
// a hidden marker with its outbox key, and Post looks for the marker
// before writing, so a row performed just before a crash is not posted
// twice. Writes to one installation are spaced (GitHub asks for at least
// a second between mutative requests).
type Commenter struct {
	client   func(installationID int64) (*gh.Client, error)
	spacing  time.Duration
	login    string
	appID    int64
	redactor *engine.Redactor
	// wait sleeps for d or until ctx ends; tests replace it to record the
	// pacing instead of sleeping.
	wait func(ctx context.Context, d time.Duration) error
	now  func() time.Time

	mu        sync.Mutex
	nextWrite map[int64]time.Time
	// posting serializes the posts of one key, and posted remembers the
	// comments this process wrote by key: a second poster of a key (a
	// redelivered comment and the start-up reconciliation, together) gets
	// the first one's comment instead of writing another, even before
	// GitHub lists it.
	posting map[string]*keyLock
	posted  map[string]*gh.IssueComment
}

// keyLock is a lock of one key, freed once nobody holds or waits for it.
type keyLock struct {
	mu    sync.Mutex
	users int
}

// lockKey locks key's posts and returns the unlock.
func (c *Commenter) lockKey(key string) func() {
	c.mu.Lock()
	if c.posting == nil {
		c.posting = map[string]*keyLock{}
	}
	l := c.posting[key]
	if l == nil {
		l = &keyLock{}
		c.posting[key] = l
	}
	l.users++
	c.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		c.mu.Lock()
		if l.users--; l.users == 0 {
			delete(c.posting, key)
		}
		c.mu.Unlock()
	}
}

// CommenterOptions configure a Commenter. Client is required.
type CommenterOptions struct {
	// Client returns the API client of an installation (App.Installation).
	Client func(installationID int64) (*gh.Client, error)
	// Pace spaces the writes to one installation; 0 means
	// DefaultWritePace, a negative value no spacing.
	Pace time.Duration
	// Login is the App's own login ("<slug>[bot]"); when set, only its
	// comments are taken for the bot's (App.Login says it).
	Login string
	// AppID is the App's id (App.ID): a check run is found again only
	// when it is this App's. Zero finds none, so each sync creates one.
	AppID int64
	// Redactor scrubs the server's secrets from every comment and check
	// run written, whatever wrote it (the relay's status and questions, the
	// handler's replies). nil means nothing is scrubbed.
	Redactor *engine.Redactor
}

// NewCommenter returns a Commenter over the App's installations.
func NewCommenter(o CommenterOptions) *Commenter {
	pace := cmp.Or(o.Pace, DefaultWritePace)
	return &Commenter{client: o.Client, spacing: max(pace, 0), login: o.Login, appID: o.AppID, redactor: o.Redactor,
		wait: sleepCtx, now: time.Now, nextWrite: map[int64]time.Time{}}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Marker is the hidden line that identifies the comment of outbox key.
func Marker(key string) string { return "<!-- iterion:" + key + " -->" }

// CommentBody returns body with key's marker as its last line, cut to
// MaxCommentBytes on a character boundary. HTML comments in body are
// broken (a zero-width space after "<"), so words the bot echoes cannot
// carry a marker, or hide text.
func CommentBody(key, body string) string {
	body = strings.ReplaceAll(body, "<!--", "<\u200b!--")
	marker := "\n\n" + Marker(key)
	if len(body)+len(marker) <= MaxCommentBytes {
		return body + marker
	}
	cut := MaxCommentBytes - len(marker) - len(truncatedNote)
	for cut > 0 && !utf8.RuneStart(body[cut]) {
		cut--
	}
	return body[:cut] + truncatedNote + marker
}

// Post writes body as a comment on pull request pr of owner/repo, once per
// key, and returns the comment's id.
func (c *Commenter) Post(ctx context.Context, installationID int64, owner, repo string, pr int, key, body string) (int64, error) {
	cm, err := c.PostComment(ctx, installationID, owner, repo, pr, key, body)
	return cm.GetID(), err
}

// PostComment is Post returning the comment (its id and html_url); a
// comment found by its marker is returned as GitHub has it.
func (c *Commenter) PostComment(ctx context.Context, installationID int64, owner, repo string, pr int, key, body string) (*gh.IssueComment, error) {
	client, err := c.client(installationID)
	if err != nil {
		return nil, err
	}
	pkey := fmt.Sprintf("%d/%s/%s#%d/%s", installationID, owner, repo, pr, key)
	defer c.lockKey(pkey)()
	c.mu.Lock()
	cm := c.posted[pkey]
	c.mu.Unlock()
	if cm != nil {
		return cm, nil
	}
	if cm, err := c.find(ctx, client, owner, repo, pr, key); err != nil || cm != nil {
		return cm, err
	}
	if err := c.pace(ctx, installationID); err != nil {
		return nil, err
	}
	text := c.text(key, body)
	cm, resp, err := client.Issues.CreateComment(ctx, owner, repo, pr, &gh.IssueComment{Body: &text})
	if err != nil {
		return nil, classify(fmt.Sprintf("commenting on %s/%s#%d", owner, repo, pr), resp, err)
	}
	c.mu.Lock()
	if c.posted == nil || len(c.posted) > 10000 {
		c.posted = map[string]*gh.IssueComment{} // only a cache: the marker finds older ones
	}
	c.posted[pkey] = cm
	c.mu.Unlock()
	return cm, nil
}

// EnsureIssue returns the number of the App's issue of owner/repo that
// carries key's marker, with title and body (cut to fit, scrubbed and
// marked as comments are): issue n when GitHub still has it, else the
// one its marker finds among the App's issues (written before a crash),
// else a new one. An issue whose body differs is edited; its state is
// left as people set it.
func (c *Commenter) EnsureIssue(ctx context.Context, installationID int64, owner, repo string, n int, key, title, body string) (int, error) {
	client, err := c.client(installationID)
	if err != nil {
		return 0, err
	}
	defer c.lockKey(fmt.Sprintf("%d/%s/%s/issue/%s", installationID, owner, repo, key))()
	text := c.text(key, body)
	var is *gh.Issue
	if n > 0 {
		got, resp, err := client.Issues.Get(ctx, owner, repo, n)
		switch {
		case resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone):
			// Deleted or transferred: a new one.
		case err != nil:
			return 0, classify(fmt.Sprintf("reading issue %s/%s#%d", owner, repo, n), resp, err)
		case got.IsPullRequest() || !c.ours(&gh.IssueComment{User: got.User}):
			// Not ours (a number recorded for another repository's issue).
		default:
			is = got
		}
	}
	if is == nil {
		if is, err = c.findIssue(ctx, client, owner, repo, key); err != nil {
			return 0, err
		}
	}
	if is == nil {
		if err := c.pace(ctx, installationID); err != nil {
			return 0, err
		}
		created, resp, err := client.Issues.Create(ctx, owner, repo, &gh.IssueRequest{Title: &title, Body: &text})
		if err != nil {
			return 0, classify(fmt.Sprintf("opening an issue on %s/%s", owner, repo), resp, err)
		}
		return created.GetNumber(), nil
	}
	if is.GetBody() != text || is.GetTitle() != title {
		if err := c.pace(ctx, installationID); err != nil {
			return 0, err
		}
		if _, resp, err := client.Issues.Edit(ctx, owner, repo, is.GetNumber(), &gh.IssueRequest{Title: &title, Body: &text}); err != nil {
			return 0, classify(fmt.Sprintf("editing issue %s/%s#%d", owner, repo, is.GetNumber()), resp, err)
		}
	}
	return is.GetNumber(), nil
}

// findIssue returns the App's issue (open or closed) whose body ends
// with key's marker, nil when none.
func (c *Commenter) findIssue(ctx context.Context, client *gh.Client, owner, repo, key string) (*gh.Issue, error) {
	marker := "\n\n" + Marker(key)
	opts := &gh.IssueListByRepoOptions{State: "all", Creator: c.login, ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		list, resp, err := client.Issues.ListByRepo(ctx, owner, repo, opts)
		if err != nil {
			return nil, classify(fmt.Sprintf("listing the issues of %s/%s", owner, repo), resp, err)
		}
		for _, is := range list {
			if !is.IsPullRequest() && c.ours(&gh.IssueComment{User: is.User}) && strings.HasSuffix(strings.TrimRight(is.GetBody(), "\n"), marker) {
				return is, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

// ErrCommentGone is the error of an edit of a comment GitHub no longer
// has (someone deleted it): the caller posts it again.
var ErrCommentGone = errors.New("the comment was deleted")

// text is the body a comment of key is written with.
func (c *Commenter) text(key, body string) string { return CommentBody(key, c.redactor.String(body)) }

// Edit replaces the body of the bot's comment id, keeping key's marker.
// A comment that was deleted is ErrCommentGone.
func (c *Commenter) Edit(ctx context.Context, installationID int64, owner, repo string, id int64, key, body string) error {
	client, err := c.client(installationID)
	if err != nil {
		return err
	}
	if err := c.pace(ctx, installationID); err != nil {
		return err
	}
	text := c.text(key, body)
	_, resp, err := client.Issues.EditComment(ctx, owner, repo, id, &gh.IssueComment{Body: &text})
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		c.mu.Lock()
		maps.DeleteFunc(c.posted, func(_ string, cm *gh.IssueComment) bool { return cm.GetID() == id })
		c.mu.Unlock()
		return fmt.Errorf("editing comment %d on %s/%s: %w", id, owner, repo, ErrCommentGone)
	}
	if err != nil {
		return classify(fmt.Sprintf("editing comment %d on %s/%s", id, owner, repo), resp, err)
	}
	return nil
}

// React adds a reaction (GitHub's content names: "eyes", "+1", …) to an
// issue or PR comment. GitHub keeps one reaction of a kind per user, so
// reacting again is harmless.
func (c *Commenter) React(ctx context.Context, installationID int64, owner, repo string, commentID int64, content string) error {
	client, err := c.client(installationID)
	if err != nil {
		return err
	}
	if err := c.pace(ctx, installationID); err != nil {
		return err
	}
	_, resp, err := client.Reactions.CreateIssueCommentReaction(ctx, owner, repo, commentID, content)
	if err != nil {
		return classify(fmt.Sprintf("reacting to comment %d on %s/%s", commentID, owner, repo), resp, err)
	}
	return nil
}

// findWindow is how far back find looks: a comment it looks for was
// written by a retry of a recent attempt (outbox rows and deliveries give
// up within hours), and edited comments count from their last edit.
const findWindow = 48 * time.Hour

// find returns the bot's comment carrying key's marker, nil when none.
// Only comments updated within findWindow are read (GitHub lists a PR's
// comments oldest first whatever the sort asked), so a long PR costs a
// page or two, not all its history.
func (c *Commenter) find(ctx context.Context, client *gh.Client, owner, repo string, pr int, key string) (*gh.IssueComment, error) {
	marker := Marker(key)
	since := c.now().Add(-findWindow)
	opts := &gh.IssueListCommentsOptions{Since: &since, Sort: gh.String("created"), Direction: gh.String("desc"), ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		cms, resp, err := client.Issues.ListComments(ctx, owner, repo, pr, opts)
		if err != nil {
			return nil, classify(fmt.Sprintf("listing the comments of %s/%s#%d", owner, repo, pr), resp, err)
		}
		for _, cm := range cms {
			// Anyone can write a marker; only the App's own comments count,
			// with the marker as their last line, or a guessed key would
			// silence the bot.
			if c.ours(cm) && strings.HasSuffix(strings.TrimRight(cm.GetBody(), "\n"), "\n\n"+marker) {
				return cm, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

// ours reports whether cm was written by the App: by its login when
// known, else by any bot account.
func (c *Commenter) ours(cm *gh.IssueComment) bool {
	if c.login != "" {
		return strings.EqualFold(cm.GetUser().GetLogin(), c.login)
	}
	return cm.GetUser().GetType() == "Bot"
}

// pace holds a write to an installation until its pace after the previous one.
func (c *Commenter) pace(ctx context.Context, installationID int64) error {
	c.mu.Lock()
	now := c.now()
	at := c.nextWrite[installationID]
	if at.Before(now) {
		at = now
	}
	c.nextWrite[installationID] = at.Add(c.spacing)
	c.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		return c.wait(ctx, d)
	}
	return nil
}

// classify wraps an API error:
//   - a rate limit (read by the App's transport from GitHub's headers, or
//     go-github's own refusal before a call while the primary window is
//     used up) is a *RetryLater with Limited set, which is never given up;
//   - an installation GitHub mints no token for is its
//     *InstallationError, which holds the work instead of retrying it;
//   - server errors, a token GitHub stopped accepting, and network
//     failures are a *RetryLater;
//   - anything else (a missing PR, a refused body) is permanent and named
//     for the reader.
func classify(what string, resp *gh.Response, err error) error {
	var limited *RateLimitError
	var rl *gh.RateLimitError
	var inst *InstallationError
	switch {
	case errors.As(err, &inst):
		return fmt.Errorf("%s: %w", what, inst)
	case errors.As(err, &limited):
		return &RetryLater{After: max(time.Until(limited.Until), time.Second), Limited: true, Err: fmt.Errorf("%s: %w", what, limited)}
	case errors.As(err, &rl):
		return &RetryLater{After: max(time.Until(rl.Rate.Reset.Time), time.Second), Limited: true, Err: fmt.Errorf("%s: GitHub's rate limit is used up until %s", what, rl.Rate.Reset.UTC().Format(time.RFC3339))}
	}
	if resp != nil && resp.Response != nil {
		// A client not built on the App's transport sees the limit here.
		var er *gh.ErrorResponse
		if e := readLimit(resp.Response, func() string {
			if errors.As(err, &er) {
				return er.Message
			}
			return ""
		}, time.Now(), 0); e != nil {
			return &RetryLater{After: max(time.Until(e.Until), time.Second), Limited: true, Err: fmt.Errorf("%s: %w", what, e)}
		}
		switch {
		case resp.StatusCode == http.StatusUnauthorized:
			// The installation's token was revoked (the App uninstalled or
			// suspended): the next attempt mints a new one, or learns why
			// it cannot.
			return &RetryLater{After: 5 * time.Second, Err: fmt.Errorf("%s: GitHub no longer accepts the installation's token", what)}
		case resp.StatusCode >= 500:
			return &RetryLater{After: retryAfter(resp, 30*time.Second), Err: fmt.Errorf("%s: GitHub answered %s", what, resp.Status)}
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if resp == nil && transient(err) {
		return &RetryLater{After: 30 * time.Second, Err: fmt.Errorf("%s: %w", what, err)}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// transient reports whether a request failed on the way (a timeout, a
// refused or reset connection, a cut answer), which a later try may not.
func transient(err error) bool {
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// retryAfter is the wait a response's Retry-After header asks for, in
// seconds, else def.
func retryAfter(resp *gh.Response, def time.Duration) time.Duration {
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return def
}
