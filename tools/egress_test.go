package tools

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// TestAllowlistThroughTools: get_config shows the allowlist, run_code passes
// allow_domains on and refuses a widening one, and the result carries the network use,
// saying so when the byte cap cut it.
func TestAllowlistThroughTools(t *testing.T) {
	var got sandbox.Spec
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		got = s
		res, err := runnertest.Echo(ctx, s)
		res.Network = &sandbox.NetworkUse{Allowed: 1, Refused: 1, Received: 1 << 20, Capped: true, MaxBytes: 1 << 20,
			Connections: []sandbox.Connection{{Host: "pypi.org\x1b[31m", Port: 443, Verdict: "cut", Rule: "byte-cap"},
				{Host: "evil.org", Port: 443, Verdict: "refused", Rule: "domain"}}}
		return res, err
	})
	d.Runner.Network = sandbox.NetworkAllowlist
	d.Runner.Egress = &sandbox.Egress{Domains: []string{"pypi.org", "*.pythonhosted.org"}, Ports: []int{443}, MaxBytes: 1 << 20, MaxConnections: 8}
	if !*RunCode(d).Tool.Annotations.OpenWorldHint {
		t.Error("not openWorld with network allowlist")
	}
	if desc := RunCode(d).Tool.Description; !strings.Contains(desc, "pypi.org, *.pythonhosted.org") || !strings.Contains(desc, "403") {
		t.Errorf("run_code's description does not give the allowlist: %s", desc)
	}
	c := startClient(t, d)

	r := call(t, c, "get_config", nil)
	var v ConfigView
	b, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.Egress == nil || !slices.Equal(v.Egress.Domains, d.Runner.Egress.Domains) || !strings.Contains(text(r), "egress allowlist pypi.org") {
		t.Errorf("get_config: %+v\n%s", v.Egress, text(r))
	}

	r = call(t, c, "run_code", map[string]any{"code": "print(1)", "allow_domains": []string{"files.pythonhosted.org"}})
	if got.Egress == nil || !slices.Equal(got.Egress.Domains, []string{"files.pythonhosted.org"}) {
		t.Errorf("spec egress %+v", got.Egress)
	}
	out := structured(t, r)
	if out.Network == nil || !out.Network.Capped || len(out.Network.Connections) != 2 || strings.ContainsRune(out.Network.Connections[0].Host, 0x1b) {
		t.Errorf("network in the result: %+v", out.Network)
	}
	if !strings.Contains(text(r), "byte cap of 1048576 bytes was reached") {
		t.Errorf("the text does not say the byte cap cut the call:\n%s", text(r))
	}
	r = call(t, c, "run_code", map[string]any{"code": "print(1)", "allow_domains": []string{"evil.org"}})
	if !r.IsError || !strings.Contains(text(r), "not on the operator's allowlist") {
		t.Errorf("widening allow_domains: isError=%t %s", r.IsError, text(r))
	}
}
