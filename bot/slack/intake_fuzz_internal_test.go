package slack

import (
	"context"
	"log/slog"
	"testing"

	"github.com/iterion-bot/iterion/internal/fakeslack"
	"github.com/iterion-bot/iterion/store"
)

// Whatever a signed request's body holds (Slack's signature says who sent
// it, not that it is well formed), taking it in never panics: it is
// stored, ignored or refused.
func FuzzTake(f *testing.F) {
	fake := fakeslack.New(f)
	db, err := store.Open(f.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	tk := &taker{team: fakeslack.TeamID, botUser: fakeslack.BotUserID, slash: DefaultCommand, store: db,
		client: NewClient(ClientOptions{Token: fakeslack.BotToken, APIURL: fake.URL(), Pace: -1}), log: slog.New(slog.DiscardHandler)}
	m := fakeslack.Message{Channel: fakeslack.Channel, TS: "1.000002", ThreadTS: "1.000001", User: "U1", Text: "yes"}
	f.Add(fakeslack.MessageEvent(m, "Ev1"))
	f.Add([]byte(`{"type":"url_verification","challenge":"c"}`))
	f.Add([]byte(`{"type":"view_submission","team":{"id":"T0FAKE"},"view":{"callback_id":"iterion/answer","private_metadata":"{\"run\":\"r\"}"}}`))
	f.Add([]byte(`{"type":"block_actions","team":{"id":"T0FAKE"},"actions":[{"action_id":"iterion/option/1","value":"9"}]}`))
	f.Add([]byte(`{"type":"block_actions","team":{"id":"T0FAKE"},"actions":[{"action_id":"iterion/words"}],"container":{"channel_id":"C","message_ts":"1"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx := context.Background()
		_, _ = tk.event(ctx, body)
		_, _ = tk.interaction(ctx, body)
	})
}
