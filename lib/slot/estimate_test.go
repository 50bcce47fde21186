package slot

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// The replay's arithmetic: each case is worked out by hand in its name,
// with reboots of 10 minutes.
func TestReplay(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	min := func(n int) time.Duration { return time.Duration(n) * time.Minute }
	one := func(wave int, byGroup map[string]int) map[int]map[string]int {
		return map[int]map[string]int{wave: byGroup}
	}
	tests := []struct {
		name  string
		setup func(p *replay)
		want  time.Duration // after now
	}{
		{"4 nodes, max_holders 1: 4 × 10m = 40m", func(p *replay) {
			p.pending = one(0, map[string]int{"": 4})
			p.groups[""] = groupRule{max: 1}
		}, min(40)},
		{"4 nodes, max_holders 2: 2 rounds = 20m", func(p *replay) {
			p.pending = one(0, map[string]int{"": 4})
			p.groups[""] = groupRule{max: 2}
		}, min(20)},
		{"3 nodes, max_holders 2: 2 rounds = 20m", func(p *replay) {
			p.pending = one(0, map[string]int{"": 3})
			p.groups[""] = groupRule{max: 2}
		}, min(20)},
		{"min_interval 15m, max_holders 2: starts at 0, 15, 30, 45, the last back at 55m", func(p *replay) {
			p.pending = one(0, map[string]int{"": 4})
			p.groups[""] = groupRule{max: 2, interval: min(15)}
		}, min(55)},
		{"max_starts_per_hour 2, max_holders 10: starts at 0, 0, 60, 60: 70m", func(p *replay) {
			p.pending = one(0, map[string]int{"": 4})
			p.groups[""] = groupRule{max: 10}
			p.perHour = 2
		}, min(70)},
		{"two groups of 2 at max_holders 2, max_holders_total 2: 20m, not 10m", func(p *replay) {
			p.pending = one(0, map[string]int{"a": 2, "b": 2})
			p.groups["a"], p.groups["b"] = groupRule{max: 2}, groupRule{max: 2}
			p.maxTotal = 2
		}, min(20)},
		{"two groups of 2 at max_holders 1, no fleet budget: in parallel, 20m", func(p *replay) {
			p.pending = one(0, map[string]int{"a": 2, "b": 2})
			p.groups["a"], p.groups["b"] = groupRule{max: 1}, groupRule{max: 1}
		}, min(20)},
		{"a canary, then wave 1 of 2 after wave_bake_sec 30m: 10 + 30 + 10 = 50m", func(p *replay) {
			p.pending = map[int]map[string]int{0: {"": 1}, 1: {"": 2}}
			p.groups[""] = groupRule{max: 2}
			p.bake = min(30)
		}, min(50)},
		{"a node down, back in 6m, then one more at max_holders 1: 16m", func(p *replay) {
			p.running = []run{{group: "", end: now.Add(min(6))}}
			p.pending = one(0, map[string]int{"": 1})
			p.groups[""] = groupRule{max: 1}
		}, min(16)},
		{"a wave-1 node waits for a wave-0 node down until 6m: 16m", func(p *replay) {
			p.running = []run{{group: "", wave: 0, end: now.Add(min(6))}}
			p.pending = one(1, map[string]int{"": 1})
			p.groups[""] = groupRule{max: 5}
		}, min(16)},
		{"the group's last start 5m ago, min_interval 15m: start at 10m, back at 20m", func(p *replay) {
			p.pending = one(0, map[string]int{"": 1})
			p.groups[""] = groupRule{max: 1, interval: min(15)}
			p.lastStart[""] = now.Add(-min(5))
		}, min(20)},
		{"2 starts 50m and 40m ago, max_starts_per_hour 2: start at 10m, back at 20m", func(p *replay) {
			p.pending = one(0, map[string]int{"": 1})
			p.groups[""] = groupRule{max: 3}
			p.perHour = 2
			p.starts = []time.Time{now.Add(-min(50)), now.Add(-min(40))}
		}, min(20)},
		{"wave 0 completed 10m ago, wave_bake_sec 30m: wave 1 starts at 20m, back at 30m", func(p *replay) {
			p.pending = one(1, map[string]int{"": 1})
			p.groups[""] = groupRule{max: 1}
			p.bake = min(30)
			p.waveDone[0] = now.Add(-min(10))
		}, min(30)},
		{"nothing left: now", func(p *replay) {}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &replay{now: now, reboot: min(10), pending: map[int]map[string]int{}, groups: map[string]groupRule{},
				lastStart: map[string]time.Time{}, waveDone: map[int]time.Time{}}
			tt.setup(p)
			end, ok := p.finish()
			if !ok || !end.Equal(now.Add(tt.want)) {
				t.Fatalf("end %v (ok %v), want now + %v", end.Sub(now), ok, tt.want)
			}
		})
	}
	t.Run("instant reboots end", func(t *testing.T) {
		p := &replay{now: now, pending: one(0, map[string]int{"": 3}), groups: map[string]groupRule{"": {max: 1}},
			lastStart: map[string]time.Time{}, waveDone: map[int]time.Time{}}
		if end, ok := p.finish(); !ok || !end.Equal(now) {
			t.Fatalf("end %v ok %v", end, ok)
		}
	})
}

func TestMedian(t *testing.T) {
	m := time.Minute
	for _, tt := range []struct {
		in   []time.Duration
		want time.Duration
	}{{nil, 0}, {[]time.Duration{5 * m}, 5 * m}, {[]time.Duration{100 * m, m, 3 * m}, 3 * m}, {[]time.Duration{4 * m, 2 * m}, 3 * m}} {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// The estimate from a count: its inputs (the measured median, the nodes
// left, each group's budget, the fleet's rules), held nodes left out, and
// "unknown" with why when nothing is measured, the rollout is paused or
// halted.
func TestEstimate(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	done := func(node string, d time.Duration) Done {
		return Done{Node: node, Since: now.Add(-time.Hour), At: now.Add(-time.Hour + d), DurationMS: d.Milliseconds()}
	}
	measured := []Done{done("m1", time.Minute), done("m2", 10*time.Minute), done("m3", 100*time.Minute)}
	twoInDB := func(r *policy.NodeRecord) { r.Rules = &policy.Rules{MaxHolders: config.Count(2)} }
	records := func() []policy.NodeRecord {
		db1, db2, db3 := rec("db1", "db", 0, policy.StateBlocked, true), rec("db2", "db", 0, policy.StateNeedsReboot, true), rec("db3", "db", 0, policy.StateWaiting, true)
		twoInDB(&db1)
		return []policy.NodeRecord{rec("self", "", 0, policy.StateNeedsReboot, true), db1, db2, db3, rec("held", "", 0, policy.StateBlocked, true), rec("m1", "", 0, policy.StateIdle, false)}
	}
	tests := []struct {
		name    string
		mod     func(c *Count)
		fleet   func(f *Fleet)
		at      time.Duration // after now; -1: unknown
		unknown string
	}{
		{"self, then db's 3 at max_holders 2 (db1's record): db in 2 rounds of 10m, self alongside: 20m", nil, nil, 20 * time.Minute, ""},
		{"max_holders_total 1: 4 reboots one after another, 40m", nil, func(f *Fleet) { f.Rules.MaxTotal = config.Count(1) }, 40 * time.Minute, ""},
		{"no completion measured", func(c *Count) { c.Rollout.Done = nil }, nil, -1, "no reboot duration measured"},
		{"paused", func(c *Count) { c.View.Paused = &policy.Pause{Reason: "freeze"} }, nil, -1, "paused cluster-wide (freeze)"},
		{"halted", func(c *Count) { c.Rollout.Halts = []Halt{{Reason: "x"}} }, nil, -1, "halted itself"},
		{"nothing left", func(c *Count) { c.View.Nodes = c.View.Nodes[5:] }, nil, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := handFleet(now)
			if tt.fleet != nil {
				tt.fleet(&f)
			}
			c := handCount(f, records(), nil, Rollout{Done: measured})
			c.View.Holds = []policy.Override{{Node: "held"}}
			if tt.mod != nil {
				tt.mod(&c)
			}
			e := f.Estimate(c, f.Decide(c), Progress(c))
			if tt.at < 0 {
				if !e.At.IsZero() || !strings.Contains(e.Unknown, tt.unknown) {
					t.Fatalf("estimate %+v: want unknown, %q", e, tt.unknown)
				}
				return
			}
			if e.Unknown != "" || !e.At.Equal(now.Add(tt.at)) {
				t.Fatalf("estimate at now + %v (%q), want now + %v", e.At.Sub(now), e.Unknown, tt.at)
			}
			if tt.at == 0 {
				return
			}
			if e.Reboot != 10*time.Minute || e.Samples != 3 || e.Remaining != 4 || e.Held != 1 || e.Down != 0 {
				t.Errorf("inputs %+v: want the median 10m of 3, 4 remaining, 1 held", e)
			}
			want := []slotinfo.GroupPlan{{Group: "", Remaining: 1, MaxHolders: 1}, {Group: "db", Remaining: 3, MaxHolders: 2}}
			if len(e.Groups) != 2 || e.Groups[0] != want[0] || e.Groups[1] != want[1] {
				t.Errorf("groups %+v, want %+v", e.Groups, want)
			}
		})
	}
	t.Run("a node down is back one median after its slot was taken", func(t *testing.T) {
		f := handFleet(now)
		c := handCount(f, []policy.NodeRecord{rec("x", "", 0, policy.StateRebooting, true)}, []Parsed{slotOf("x", "", 0, now.Add(-4*time.Minute))}, Rollout{Done: measured})
		e := f.Estimate(c, f.Decide(c), Progress(c))
		if e.Down != 1 || e.Remaining != 1 || !e.At.Equal(now.Add(6*time.Minute)) {
			t.Fatalf("estimate %+v, want x back at now + 6m", e)
		}
	})
}

// BenchmarkReplay measures the estimate of a large fleet's rollout: 10,000
// reboots in 20 groups, two waves, every pacing rule on.
func BenchmarkReplay(b *testing.B) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for b.Loop() {
		p := &replay{now: now, reboot: 10 * time.Minute, pending: map[int]map[string]int{0: {}, 1: {}}, groups: map[string]groupRule{},
			lastStart: map[string]time.Time{}, waveDone: map[int]time.Time{}, maxTotal: 40, perHour: 200, bake: time.Hour}
		for g := range 20 {
			name := fmt.Sprintf("g%02d", g)
			p.pending[0][name], p.pending[1][name] = 10, 490
			p.groups[name] = groupRule{max: 3, interval: time.Minute}
		}
		if _, ok := p.finish(); !ok {
			b.Fatal("no end")
		}
	}
}
