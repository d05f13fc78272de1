package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// Account links: a chat user (a Slack user of a workspace) linked to a
// GitHub account by the person, through GitHub's sign-in, and the
// single-use nonces of the sign-ins under way.

// Link is a chat user's link to a GitHub account (bot/delivery's).
type Link = delivery.Link

func linkKey(team, user string) []byte { return []byte("link/" + team + "/" + user) }
func linkGHPrefix(id int64) []byte     { return []byte("linkgh/" + pad(id) + "/") }
func linkGHKey(id int64, team, user string) []byte {
	return append(linkGHPrefix(id), team+"/"+user...)
}
func nonceKey(n string) []byte { return []byte("nonce/" + n) }

// linkRecord is the value of a link/ key.
type linkRecord struct {
	GitHubID int64     `json:"github_id"`
	Login    string    `json:"login"`
	LinkedAt time.Time `json:"linked_at"`
}

// linkRef is the value of a linkgh/ key: the link it indexes.
type linkRef struct {
	Team string `json:"team"`
	User string `json:"user"`
}

// validLinkPart keeps team and user ids out of other keys: no slash.
func validLinkPart(s string) bool { return s != "" && !strings.Contains(s, "/") && len(s) <= 64 }

// SetLink records, synced, that the chat user l.Team/l.User is GitHub
// account l.GitHubID (l.Login), replacing the user's earlier link.
func (db *DB) SetLink(ctx context.Context, l Link) error {
	if !validLinkPart(l.Team) || !validLinkPart(l.User) || l.GitHubID <= 0 || l.Login == "" {
		return fmt.Errorf("linking %s/%s: the team, the user (without /), the GitHub id and login must be set", l.Team, l.User)
	}
	err := db.write(ctx, bookkeeping, true, func(txn *tx) error {
		var old linkRecord
		switch err := get(txn, linkKey(l.Team, l.User), &old); {
		case err == nil:
			if err := txn.Delete(linkGHKey(old.GitHubID, l.Team, l.User)); err != nil {
				return err
			}
		case !errors.Is(err, engine.ErrNotFound):
			return err
		}
		at := l.LinkedAt
		if at.IsZero() {
			at = db.now()
		}
		if err := put(txn, linkKey(l.Team, l.User), linkRecord{GitHubID: l.GitHubID, Login: l.Login, LinkedAt: at.UTC()}); err != nil {
			return err
		}
		return put(txn, linkGHKey(l.GitHubID, l.Team, l.User), linkRef{Team: l.Team, User: l.User})
	})
	if err != nil {
		return fmt.Errorf("linking %s/%s to GitHub %s: %w", l.Team, l.User, l.Login, err)
	}
	return nil
}

// Link returns the link of the chat user team/user; engine.ErrNotFound
// when there is none.
func (db *DB) Link(ctx context.Context, team, user string) (Link, error) {
	var rec linkRecord
	err := db.view(ctx, func(txn *tx) error { return get(txn, linkKey(team, user), &rec) })
	if err != nil {
		return Link{}, fmt.Errorf("reading the link of %s/%s: %w", team, user, err)
	}
	return Link{Team: team, User: user, GitHubID: rec.GitHubID, Login: rec.Login, LinkedAt: rec.LinkedAt}, nil
}

// DropLinks removes, synced, every link to GitHub account githubID (its
// authorization was revoked) and returns how many there were.
func (db *DB) DropLinks(ctx context.Context, githubID int64) (int, error) {
	n := 0
	err := db.write(ctx, bookkeeping, true, func(txn *tx) error {
		n = 0
		var refs []linkRef
		if err := scan(txn, linkGHPrefix(githubID), nil, func(_ []byte, r *linkRef) (bool, error) {
			refs = append(refs, *r)
			return true, nil
		}); err != nil {
			return err
		}
		for _, r := range refs {
			if err := txn.Delete(linkKey(r.Team, r.User)); err != nil {
				return err
			}
			if err := txn.Delete(linkGHKey(githubID, r.Team, r.User)); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("removing the links of GitHub account %s: %w", strconv.FormatInt(githubID, 10), err)
	}
	return n, nil
}

// UseNonce records nonce as used until expires, synced, and reports
// whether it was unused: the second use of a nonce is false.
func (db *DB) UseNonce(ctx context.Context, nonce string, expires time.Time) (bool, error) {
	if nonce == "" || len(nonce) > 128 {
		return false, errors.New("using a nonce: it must be 1 to 128 bytes")
	}
	fresh := false
	err := db.write(ctx, bookkeeping, true, func(txn *tx) error {
		fresh = false
		if _, err := txn.Get(nonceKey(nonce)); err == nil {
			return nil
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		ttl := expires.Sub(db.now())
		if ttl < time.Second {
			ttl = time.Second
		}
		b, err := encode(&struct{}{})
		if err != nil {
			return err
		}
		fresh = true
		return txn.SetEntry(badger.NewEntry(nonceKey(nonce), b).WithTTL(ttl))
	})
	if err != nil {
		return false, fmt.Errorf("using a nonce: %w", err)
	}
	return fresh, nil
}
