package linux

import (
	"context"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

func TestSmoke(t *testing.T) {
	s, err := New(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(context.Background(), sandbox.Spec{Argv: []string{"/usr/bin/python3", "-I", "main.py"}, CodeFile: "main.py", Code: []byte("import os,sys\nprint('hi', os.getuid(), os.getcwd(), sorted(os.listdir('/')))\nprint(open('/etc/passwd').read())\nprint(sorted(os.environ))\n")})
	t.Logf("%+v err=%v", res, err)
	t.Logf("stdout=%s stderr=%s", res.Stdout.Bytes(), res.Stderr.Bytes())
}
