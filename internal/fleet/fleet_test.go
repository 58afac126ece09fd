package fleet

import (
	"testing"
	"time"
)

// TestLostAnswerOnlyExplainsTheKillWindow: a call that ran twice passes only when the
// client retried it and exactly one run ended on the killed replica just before the kill;
// every other duplicate stays a failure.
func TestLostAnswerOnlyExplainsTheKillWindow(t *testing.T) {
	kill := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)
	before := func(d time.Duration) time.Time { return kill.Add(-d) }
	retried := outcome{attempts: 2}
	cases := []struct {
		name string
		o    outcome
		runs []run
		want bool
	}{
		{"retried, killed replica 2 ms before the kill", retried,
			[]run{{"r2", before(2 * time.Millisecond)}, {"r0", kill.Add(time.Second)}}, true},
		{"not retried", outcome{attempts: 1},
			[]run{{"r2", before(2 * time.Millisecond)}, {"r0", kill.Add(time.Second)}}, false},
		{"no run on the killed replica", retried,
			[]run{{"r1", before(2 * time.Millisecond)}, {"r0", kill.Add(time.Second)}}, false},
		{"run on the killed replica long before the kill", retried,
			[]run{{"r2", before(2 * time.Second)}, {"r0", kill.Add(time.Second)}}, false},
		{"run on the restarted replica after the kill", retried,
			[]run{{"r2", kill.Add(time.Second)}, {"r0", kill.Add(2 * time.Second)}}, false},
		{"both runs on the killed replica before the kill", retried,
			[]run{{"r2", before(time.Millisecond)}, {"r2", before(2 * time.Millisecond)}}, false},
		{"three runs", outcome{attempts: 3},
			[]run{{"r2", before(time.Millisecond)}, {"r0", kill.Add(time.Second)}, {"r1", kill.Add(2 * time.Second)}}, false},
	}
	for _, c := range cases {
		if _, got := lostAnswer(c.o, c.runs, "r2", kill); got != c.want {
			t.Errorf("%s: lostAnswer = %v, want %v", c.name, got, c.want)
		}
	}
	if _, got := lostAnswer(retried, []run{{"r2", before(time.Millisecond)}, {"r0", kill}}, "r2", time.Time{}); got {
		t.Error("no kill recorded, yet a duplicate was explained by it")
	}
}
