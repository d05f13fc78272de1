package page

import (
	"strings"
	"testing"
	"time"
)

// A cookie is hostile input: whatever it holds, opening it never panics,
// and only what the key sealed opens.
func FuzzOpenSession(f *testing.F) {
	s := &Server{opts: Options{SessionKey: []byte("k-0123456789-0123456789-0123456789")}, now: time.Now}
	good := s.seal(sessionCookie, session{Login: "ana", Expires: 1 << 40})
	f.Add(good)
	f.Add(good + "x")
	f.Add("e30.")
	f.Add(".")
	f.Add(strings.Repeat("a", 100) + "." + strings.Repeat("b", 43))
	f.Fuzz(func(t *testing.T, cookie string) {
		var sess session
		if s.open(sessionCookie, cookie, &sess) {
			// Only a value the key sealed opens: sealing what opened
			// gives the same cookie back.
			if again := s.seal(sessionCookie, sess); again != cookie && cookie != good {
				body, _, _ := strings.Cut(cookie, ".")
				againBody, _, _ := strings.Cut(again, ".")
				if body == againBody {
					t.Fatalf("%q opened, but is not what the key seals (%q)", cookie, again)
				}
			}
		}
		// Sealed for one cookie, a value opens for no other.
		var st signinState
		if s.open(stateCookie, cookie, &st) && s.open(sessionCookie, cookie, &sess) {
			t.Fatalf("%q opens as both cookies", cookie)
		}
	})
}
