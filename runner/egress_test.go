package runner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// TestAllowDomainsNarrowsOnly: a call's allow_domains narrows the operator's allowlist
// and is refused when it would widen it, or when the network is not "allowlist".
func TestAllowDomainsNarrowsOnly(t *testing.T) {
	var logs bytes.Buffer
	var got sandbox.Spec
	r, _ := newRunner(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		got = s
		res, err := runnertest.Echo(ctx, s)
		res.Network = &sandbox.NetworkUse{Connections: []sandbox.Connection{
			{Host: "pypi.org", Port: 443, Addr: "151.101.0.223", Sent: 10, Received: 20, Verdict: "allowed"},
			{Host: "evil.org", Port: 443, Verdict: "refused", Rule: "domain"}}}
		return res, err
	}, &logs)
	r.Network = sandbox.NetworkAllowlist
	r.Egress = &sandbox.Egress{Domains: []string{"pypi.org", "*.pythonhosted.org"}, Ports: []int{443}, MaxBytes: 1 << 20}
	path := withAudit(t, r, 1<<20)
	code := []byte("print(1)")

	if _, err := r.Run(context.Background(), Call{Language: "python", Code: code}); err != nil {
		t.Fatal(err)
	}
	if got.Egress == nil || !slices.Equal(got.Egress.Domains, r.Egress.Domains) {
		t.Errorf("no allow_domains: egress %+v, want the operator's", got.Egress)
	}
	if _, err := r.Run(context.Background(), Call{Language: "python", Code: code, AllowDomains: []string{"files.pythonhosted.org"}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Egress.Domains, []string{"files.pythonhosted.org"}) || !slices.Equal(r.Egress.Domains, []string{"pypi.org", "*.pythonhosted.org"}) {
		t.Errorf("narrowed: call %q, operator %q", got.Egress.Domains, r.Egress.Domains)
	}
	for _, widen := range [][]string{{"evil.org"}, {"*.org"}, {"pythonhosted.org"}} {
		_, err := r.Run(context.Background(), Call{Language: "python", Code: code, AllowDomains: widen})
		if !errors.Is(err, policy.ErrInvalidRequest) || !IsRefusal(err) {
			t.Errorf("allow_domains %q: %v, want a refusal", widen, err)
		}
	}
	r.Network, r.Egress = sandbox.NetworkNone, nil
	if _, err := r.Run(context.Background(), Call{Language: "python", Code: code, AllowDomains: []string{"pypi.org"}}); !errors.Is(err, policy.ErrInvalidRequest) {
		t.Errorf("allow_domains without the allowlist: %v, want a refusal", err)
	}
	log, _ := os.ReadFile(path)
	for _, want := range []string{`"host":"pypi.org","port":443,"addr":"151.101.0.223","sent":10,"received":20,"verdict":"allowed"`, `"rule":"domain"`} {
		if !strings.Contains(string(log), want) {
			t.Errorf("audit log lacks %s:\n%s", want, log)
		}
	}
}
