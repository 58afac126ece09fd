//go:build unix

package stamp

import (
	"crypto/rand"
	"testing"
)

// A self-check's stamp holds its seccomp programs (≈ 5.6 KB): the size a one-shot run
// loads at every start. bigValue keeps them in the JSON (base64), as format 1 did;
// bigAttached in the attachment, as sandbox/linux's checkStamp does.
type bigValue struct {
	Rules   int               `json:"rules"`
	Filters map[string][]byte `json:"filters"`
}

type bigAttached struct {
	Rules int    `json:"rules"`
	Prog  []byte `json:"-"`
}

func (v bigAttached) Attachment() []byte     { return v.Prog }
func (v *bigAttached) Attach(b []byte) error { v.Prog = b; return nil }

func benchLoad[V any](b *testing.B, save any) {
	st, err := Open(b.TempDir()+"/state", 1<<62)
	if err != nil {
		b.Fatal(err)
	}
	k := &Key{}
	k.Add("kernel", "6.18")
	if err := st.Save("check", k, save); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var v V
		if err := st.Load("check", k, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadSelfCheckSized(b *testing.B) {
	prog := make([]byte, 5600)
	_, _ = rand.Read(prog)
	b.Run("json", func(b *testing.B) {
		benchLoad[bigValue](b, bigValue{Rules: 554, Filters: map[string][]byte{"none": prog}})
	})
	b.Run("attached", func(b *testing.B) {
		benchLoad[bigAttached](b, &bigAttached{Rules: 554, Prog: prog})
	})
}
