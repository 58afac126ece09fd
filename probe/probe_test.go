package probe

import (
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

func TestJudge(t *testing.T) {
	req := sandbox.Layer{Name: "seccomp", Required: true, Active: true}
	reqOff := sandbox.Layer{Name: "seccomp", Required: true, Active: false, Fix: "enable seccomp"}
	optOff := sandbox.Layer{Name: "cgroup-memory", Active: false, Fix: "delegate cgroups"}
	pass := Result{Name: "read-shadow", Status: Passed}
	fail := Result{Name: "read-shadow", Status: Failed, Fix: "fix mounts"}
	errd := Result{Name: "fork-bomb", Status: Errored}
	na := Result{Name: "sbpl", Status: NotApplicable}
	tests := []struct {
		name    string
		layers  []sandbox.Layer
		results []Result
		want    Verdict
	}{
		{"all good", []sandbox.Layer{req}, []Result{pass, na}, Isolated},
		{"optional layer off", []sandbox.Layer{req, optOff}, []Result{pass}, Degraded},
		{"unused layer without a fix is information", []sandbox.Layer{req, {Name: "landlock", Detail: "unused"}}, []Result{pass}, Isolated},
		{"probe errored", []sandbox.Layer{req}, []Result{pass, errd}, Degraded},
		{"required layer off", []sandbox.Layer{reqOff}, []Result{pass}, Unsafe},
		{"escape succeeded beats degraded", []sandbox.Layer{req, optOff}, []Result{errd, fail}, Unsafe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Judge(tt.layers, tt.results); got != tt.want {
				t.Errorf("Judge = %s, want %s", got, tt.want)
			}
		})
	}
	r := NewReport(sandbox.Report{Layers: []sandbox.Layer{reqOff, optOff}}, []Result{fail, fail, pass, na, errd})
	if r.Totals != (Totals{Passed: 1, Failed: 2, NotApplicable: 1, Errored: 1}) {
		t.Errorf("totals = %+v", r.Totals)
	}
	if len(r.Fixes) != 3 {
		t.Errorf("fixes = %q, want 3 distinct", r.Fixes)
	}
}
