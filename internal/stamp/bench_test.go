//go:build unix

package stamp

import (
	"crypto/rand"
	"testing"
)

// A self-check's stamp holds its seccomp program (≈ 5 KB, base64 in the JSON): the
// size a one-shot run loads at every start.
type bigValue struct {
	Rules   int               `json:"rules"`
	Filters map[string][]byte `json:"filters"`
}

func BenchmarkLoadSelfCheckSized(b *testing.B) {
	st, err := Open(b.TempDir()+"/state", 1<<62)
	if err != nil {
		b.Fatal(err)
	}
	k := &Key{}
	k.Add("kernel", "6.18")
	prog := make([]byte, 5600)
	_, _ = rand.Read(prog)
	if err := st.Save("check", k, bigValue{Rules: 554, Filters: map[string][]byte{"none": prog}}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var v bigValue
		if err := st.Load("check", k, &v); err != nil {
			b.Fatal(err)
		}
	}
}
