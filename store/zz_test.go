package store
import ("testing";"os";"fmt")
func TestMain(m *testing.M){ c:=m.Run(); fmt.Println("MAX ATTEMPTS", MaxSeen.Load()); os.Exit(c)}
