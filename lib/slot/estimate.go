package slot

import (
	"fmt"
	"sort"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// Estimate is when the rollout may be done: the remaining reboots replayed
// under the budgets and pacing, each taking the median of the measured
// reboots (docs/rollout.md, "Seeing the rollout"). It is an estimate: it
// ignores the maintenance windows, the health gates, the policies, the
// failures still to come and the nodes that will need a reboot later.
type Estimate struct {
	// At is when the last remaining reboot is expected to complete (Now
	// when nothing is left; zero when Unknown says why there is none).
	At time.Time
	// Unknown says why there is no estimate (empty when there is one).
	Unknown string
	// Remaining are the nodes still to reboot: those that need a reboot
	// and are not held, and those down now (Down of them).
	Remaining, Down int
	// Held are nodes that need a reboot but are held by an operator: left
	// out, they reboot only once released.
	Held int
	// Reboot is the median duration of Samples completed reboots within
	// the failure window, from the slot's take to its completion.
	Reboot  time.Duration
	Samples int
	// Groups are the rules of each group with reboots left, sorted.
	Groups []slotinfo.GroupPlan
	// MaxTotal, MaxStartsPerHour and WaveBakeSec are the fleet's rules
	// (0: none).
	MaxTotal, MaxStartsPerHour, WaveBakeSec int
}

// Estimate is the rollout's estimate from count c, this node's verdict v on
// it (Decide) and the nodes' progress (Progress(c)), at f's clock.
func (f Fleet) Estimate(c Count, v slotinfo.Verdict, nodes []NodeProgress) Estimate {
	now := f.now().UTC()
	e := Estimate{MaxTotal: v.Rules.MaxTotal, MaxStartsPerHour: v.Rules.MaxStartsPerHour, WaveBakeSec: v.Rules.WaveBakeSec}
	var durations []time.Duration
	for _, d := range c.Rollout.Done {
		if d.Measured() {
			durations = append(durations, time.Duration(d.DurationMS)*time.Millisecond)
		}
	}
	e.Samples = len(durations)
	e.Reboot = median(durations)
	p := replay{now: now, reboot: e.Reboot, maxTotal: e.MaxTotal, perHour: e.MaxStartsPerHour,
		bake: time.Duration(e.WaveBakeSec) * time.Second, groups: map[string]groupRule{},
		pending: map[int]map[string]int{}, lastStart: map[string]time.Time{}, waveDone: map[int]time.Time{}}
	remaining := map[string]int{}
	for _, n := range nodes {
		switch {
		case n.Progress == ProgressDown:
			// Back one median after its slot was taken; one down
			// longer than that (or since an unknown time), at once.
			end := n.Slot.Since.Add(e.Reboot)
			if n.Slot.Since.IsZero() || end.Before(now) {
				end = now
			}
			p.running = append(p.running, run{group: n.Group, wave: n.Wave, end: end})
			e.Down++
		case n.Progress != ProgressNeedReboot && n.Progress != ProgressWaiting:
			continue
		case n.Hold != nil:
			e.Held++
			continue
		default:
			if p.pending[n.Wave] == nil {
				p.pending[n.Wave] = map[string]int{}
			}
			p.pending[n.Wave][n.Group]++
		}
		remaining[n.Group]++
		e.Remaining++
	}
	for g, n := range remaining {
		r, _ := f.RulesFor(c, g)
		e.Groups = append(e.Groups, slotinfo.GroupPlan{Group: g, Remaining: n, MaxHolders: r.MaxHolders, MinIntervalSec: r.MinIntervalSec})
		p.groups[g] = groupRule{max: r.MaxHolders, interval: time.Duration(r.MinIntervalSec) * time.Second}
	}
	sort.Slice(e.Groups, func(i, j int) bool { return e.Groups[i].Group < e.Groups[j].Group })
	for _, m := range c.Rollout.Paced {
		if m.Since.After(p.lastStart[m.Group]) {
			p.lastStart[m.Group] = m.Since
		}
	}
	for _, m := range c.Rollout.Starts {
		p.starts = append(p.starts, m.Since)
	}
	sort.Slice(p.starts, func(i, j int) bool { return p.starts[i].Before(p.starts[j]) })
	for _, m := range c.Rollout.WaveDone {
		if m.Since.After(p.waveDone[m.Wave]) {
			p.waveDone[m.Wave] = m.Since
		}
	}
	switch {
	case c.View.Paused != nil:
		e.Unknown = fmt.Sprintf("reboots are paused cluster-wide (%s): nothing is admitted until `clusterrebootd resume`", c.View.Paused.Reason)
	case c.Rollout.HaltOf(f.Group) != nil || v.Rule == RuleHalted:
		e.Unknown = "the rollout halted itself after failures: nothing is admitted until `clusterrebootd resume --reason TEXT`"
	case e.Remaining == 0:
		e.At = now
	case e.Samples == 0:
		e.Unknown = fmt.Sprintf("no coordinated reboot completed within failure_window_sec (%s) yet: no reboot duration measured; the estimate starts with the first completion",
			time.Duration(v.Rules.FailureWindowSec)*time.Second)
	default:
		at, ok := p.finish()
		if !ok {
			e.Unknown = "the budgets admit none of the remaining reboots"
			break
		}
		e.At = at
	}
	return e
}

// median is the middle duration (the mean of the two middle ones of an
// even number); 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// replay is the remaining rollout, replayed under the admission's budgets
// and pacing (the rules of Decide that wait: max_holders per group,
// max_holders_total, min_interval_sec, max_starts_per_hour, and the waves
// with wave_bake_sec), each reboot taking reboot.
type replay struct {
	now    time.Time
	reboot time.Duration
	// pending counts the reboots not yet started, by wave and group;
	// running are the reboots in flight.
	pending map[int]map[string]int
	running []run
	// inGroup counts the running reboots per group.
	inGroup map[string]int
	groups  map[string]groupRule
	// maxTotal and perHour are 0 for none.
	maxTotal, perHour int
	bake              time.Duration
	// lastStart is each group's last start (for min_interval_sec); starts
	// are the fleet's starts whose hour has not ended (for
	// max_starts_per_hour), oldest first; waveDone is each wave's last
	// completion (for wave_bake_sec).
	lastStart map[string]time.Time
	starts    []time.Time
	waveDone  map[int]time.Time
}

type run struct {
	group string
	wave  int
	end   time.Time
}

type groupRule struct {
	max      int
	interval time.Duration
}

// finish replays the rollout from now: at each moment it starts every
// reboot the rules allow, lowest wave first, then moves on to the next
// moment something changes (a completion, a pacing interval's end, a start
// leaving the last hour, a wave's bake time's end). It returns when the
// last reboot completes; ok is false when the rules would never admit the
// reboots left.
func (p *replay) finish() (end time.Time, ok bool) {
	t, end := p.now, p.now
	p.inGroup = map[string]int{}
	for _, r := range p.running {
		p.inGroup[r.group]++
	}
	left := 0
	for _, byGroup := range p.pending {
		for _, n := range byGroup {
			left += n
		}
	}
	// Each step starts a reboot, completes one, or reaches the end of an
	// interval, an hour or a bake time: a few per reboot at most.
	for steps := 0; steps < 8*(left+len(p.running)+len(p.starts))+64; steps++ {
		// Time only moves on: a start whose hour has ended never counts again.
		for len(p.starts) > 0 && !p.starts[0].Add(time.Hour).After(t) {
			p.starts = p.starts[1:]
		}
		kept := p.running[:0]
		for _, r := range p.running {
			if r.end.After(t) {
				kept = append(kept, r)
				continue
			}
			p.inGroup[r.group]--
			if r.end.After(p.waveDone[r.wave]) {
				p.waveDone[r.wave] = r.end
			}
			if r.end.After(end) {
				end = r.end
			}
		}
		p.running = kept
		if left == 0 && len(p.running) == 0 {
			return end, true
		}
		wave, open := p.openWave(t)
		if open {
			for started := true; started; {
				started = false
				for _, g := range sortedGroups(p.pending[wave]) {
					if p.pending[wave][g] > 0 && p.canStart(g, t) {
						p.pending[wave][g]--
						left--
						p.running = append(p.running, run{group: g, wave: wave, end: t.Add(p.reboot)})
						p.inGroup[g]++
						p.lastStart[g] = t
						if p.perHour > 0 {
							p.starts = append(p.starts, t)
						}
						started = true
					}
				}
			}
		}
		next, found := p.next(t, wave, left > 0)
		if !found {
			return time.Time{}, false
		}
		t = next
	}
	return time.Time{}, false
}

// openWave is the lowest wave with reboots not yet started, and whether its
// nodes may start at t: no lower wave's reboot in flight, and wave_bake_sec
// past the lower waves' last completion.
func (p *replay) openWave(t time.Time) (int, bool) {
	wave, found := 0, false
	for w, byGroup := range p.pending {
		for _, n := range byGroup {
			if n > 0 && (!found || w < wave) {
				wave, found = w, true
			}
		}
	}
	if !found {
		return 0, false
	}
	for _, r := range p.running {
		if r.wave < wave {
			return wave, false
		}
	}
	return wave, !t.Before(p.bakeEnd(wave))
}

// bakeEnd is when wave's bake time after the lower waves' last completion
// ends (zero: none).
func (p *replay) bakeEnd(wave int) time.Time {
	var last time.Time
	for w, at := range p.waveDone {
		if w < wave && at.After(last) {
			last = at
		}
	}
	if last.IsZero() || p.bake == 0 {
		return time.Time{}
	}
	return last.Add(p.bake)
}

// canStart reports whether a reboot of group g may start at t (starts
// holds only the starts whose hour has not ended at t: a start record
// lives for one hour).
func (p *replay) canStart(g string, t time.Time) bool {
	rule := p.groups[g]
	switch {
	case p.inGroup[g] >= max(1, rule.max):
		return false
	case p.maxTotal > 0 && len(p.running) >= p.maxTotal:
		return false
	case rule.interval > 0 && !p.lastStart[g].IsZero() && t.Before(p.lastStart[g].Add(rule.interval)):
		return false
	case p.perHour > 0 && len(p.starts) >= p.perHour:
		return false
	}
	return true
}

// next is the first moment after t when something the rules wait for
// changes: a completion, or, with reboots left in wave, a group's interval,
// the oldest start's hour or the wave's bake time ending.
func (p *replay) next(t time.Time, wave int, left bool) (time.Time, bool) {
	var next time.Time
	consider := func(at time.Time) {
		if at.After(t) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	for _, r := range p.running {
		if !r.end.After(t) {
			return t, true // completes now: handled at once
		}
		consider(r.end)
	}
	if left {
		for g, n := range p.pending[wave] {
			if n > 0 && !p.lastStart[g].IsZero() {
				consider(p.lastStart[g].Add(p.groups[g].interval))
			}
		}
		if p.perHour > 0 && len(p.starts) > 0 {
			consider(p.starts[0].Add(time.Hour))
		}
		consider(p.bakeEnd(wave))
	}
	return next, !next.IsZero()
}

func sortedGroups(byGroup map[string]int) []string {
	out := make([]string, 0, len(byGroup))
	for g := range byGroup {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}
