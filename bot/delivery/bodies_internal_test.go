package delivery

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// However a body arrives (whole, a byte at a time, in halves, with its
// end on its last bytes), read gives it back whole, in as few chunks as it
// takes, with every byte through the signature once; and the chunks go
// back to the pool.
func TestBodiesReadWhole(t *testing.T) {
	readers := map[string]func(io.Reader) io.Reader{
		"whole":     func(r io.Reader) io.Reader { return r },
		"one byte":  iotest.OneByteReader,
		"halves":    iotest.HalfReader,
		"end early": iotest.DataErrReader,
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, chunk := range []int{64, 100, waitBuffer, 1000, DefaultChunk} {
		for _, n := range []int{0, 1, waitBuffer - 1, waitBuffer, waitBuffer + 1, 5000, 3*DefaultChunk + 7} {
			for name, wrap := range readers {
				t.Run(fmt.Sprintf("chunk %d, %d bytes, %s", chunk, n, name), func(t *testing.T) {
					b := NewBodies(BodyOptions{Chunk: chunk, Bytes: 1 << 20})
					data := make([]byte, n)
					for i := range data {
						data[i] = byte(rnd.IntN(256))
					}
					if ok, reason := b.admit(int64(n)); !ok {
						t.Fatalf("not admitted: %s", reason)
					}
					sig := sha256.New()
					bd, err := b.read(wrap(bytes.NewReader(data)), sig, 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					if got := bd.bytes(); !bytes.Equal(got, data) {
						t.Errorf("read %d bytes, not the %d sent", len(got), n)
					}
					if want := sha256.Sum256(data); !bytes.Equal(sig.Sum(nil), want[:]) {
						t.Error("the signature saw other bytes than the body's")
					}
					if want := (n + chunk - 1) / chunk; len(bd.chunks) != want {
						t.Errorf("%d chunks, want %d", len(bd.chunks), want)
					}
					if s := b.Stats(); s.Held != int64(len(bd.chunks)*chunk) || s.Reading != 1 {
						t.Errorf("while held: %+v", s)
					}
					b.release(bd.chunks)
					if s := b.Stats(); s.Held != 0 || s.Reading != 0 {
						t.Errorf("after release: %+v", s)
					}
				})
			}
		}
	}
}
