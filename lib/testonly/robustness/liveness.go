package robustness

import (
	"fmt"
	"slices"
	"strings"
)

// live judges one admission at the revision it counted at (the model's
// now): one admitted against the waves (InvWave); one not admitted for
// liveness: if, by the history at that revision, nothing held the node
// back, it should have been (a candidate that waits with room waits for
// nothing, and may wait for ever: issue 38, item 5).
func (c *checker) live(at Attempt) {
	if at.Admitted && at.Revision != 0 {
		c.waves(at)
	}
	if at.Admitted || at.Err != "" || at.Revision == 0 {
		return
	}
	key := fmt.Sprintf("%s@%d", at.Actor, at.Revision)
	if c.judged[key] {
		return // the same node counted again at the same revision
	}
	c.judged[key] = true
	c.stats.Judged++
	if at.Rule == "min_interval" || at.Rule == "max_starts_per_hour" {
		c.stats.Paced++
	}
	if at.Rule == "wave" {
		c.stats.Waited++
		if slices.ContainsFunc(c.m.waveHeld(at.Node, at.Wave), func(h string) bool { return strings.HasSuffix(h, bakingNote) }) {
			c.stats.Baked++
		}
	}
	why, ok := c.m.eligible(at)
	if !ok {
		return
	}
	told := "to wait"
	if !at.Wait {
		told = "no"
	}
	c.out = append(c.out, Violation{Invariant: InvLiveness, Revision: at.Revision,
		Detail: fmt.Sprintf("%s asked under its seat %s and was told %s (%s: %s); by the history nothing held it back: %s",
			at.Actor, strings.TrimPrefix(at.Seat, c.m.r.NS), told, at.Rule, at.Reason, why),
		Excerpt: excerpt(c.events, c.m.r.NS, at.Revision-12, at.Revision)})
}

// waves judges an admission of a later wave at the revision it counted at
// (the model's now): nothing of a lower wave may have held it back.
func (c *checker) waves(at Attempt) {
	if at.Wave == 0 {
		return
	}
	c.stats.LaterWaves++
	if held := c.m.waveHeld(at.Node, at.Wave); len(held) > 0 {
		c.out = append(c.out, Violation{Invariant: InvWave, Revision: at.Revision,
			Detail: fmt.Sprintf("%s (wave %d) was admitted on its count at revision %d while a lower wave still held it back: %s",
				at.Actor, at.Wave, at.Revision, strings.Join(held, ", ")),
			Excerpt: excerpt(c.events, c.m.r.NS, at.Revision-12, at.Revision)})
	}
}

// eligible reports whether at's node should have been admitted by the
// state at its count (the model's now), and says what it saw. The rules
// the runs use (docs/rollout.md, "The rules"): no conflict, no pause, no
// halt, failures within the budget, no hold, room in the group (slots,
// every plain seat among the holders, the candidates' seats older than its
// own) that no older FleetLock ticket of the group claims, and room in the
// fleet that no older ticket claims, the cluster policies, and nothing of a
// lower wave busy (model.waveHeld).
func (m *model) eligible(at Attempt) (string, bool) {
	seats := m.seats()
	var own *seatView
	for i := range seats {
		s := seats[i]
		if s.key == at.Seat {
			own = &seats[i]
		}
		if s.Node == at.Node && s.MachineID != "" && s.MachineID != at.Machine {
			return "", false // another machine of its name
		}
	}
	if own == nil || !own.holder {
		return "", false
	}
	for _, r := range m.records() {
		if r.Node == at.Node && r.MachineID != "" && r.MachineID != at.Machine {
			return "", false
		}
	}
	slots := m.slots()
	for _, s := range slots {
		if s.Node == at.Node && (s.BootID != at.Boot || !s.bound || s.Group != at.Group) {
			return "", false // a slot under its name that is not this boot's
		}
	}
	if m.paused() || m.held(at.Node) || m.halt(at.Group) != "" || (m.r.Paced && m.pacedBy(at.Group) != "") || (m.r.Rate > 0 && m.starts() >= m.r.Rate) {
		return "", false
	}
	if _, spent := m.spent(at.Group); spent {
		return "", false
	}
	if len(m.waveHeld(at.Node, at.Wave)) > 0 {
		return "", false
	}
	policed, ok := m.allows(at.Node, true)
	if !ok {
		return "", false
	}
	others := map[string]string{}
	total := map[string]bool{}
	for _, s := range slots {
		if s.Node == at.Node && s.BootID == at.Boot {
			continue
		}
		total[s.Node+"|"+s.BootID] = true
		if s.counts(at.Group) {
			others[s.Node+"|"+s.BootID] = s.Node + " (slot)"
		}
	}
	for _, s := range seats {
		if s.line != own.line || !s.holder || s.key == own.key {
			continue
		}
		if !s.candidate() {
			others[s.Node+"|"+s.BootID] = s.Node + " (plain seat)"
		} else if s.created < own.created {
			others[s.Node+"|"+s.BootID] = s.Node + " (older candidate seat)"
		}
	}
	limit, limitWhat := m.holders(at.Group, at.Node, nil)
	limit, limitWhat = m.capped(limit, limitWhat, own.line, func(s slotView) bool { return s.counts(at.Group) }, false)
	free := limit - len(others)
	if free <= 0 {
		return "", false
	}
	tickets := m.tickets()
	var mine *ticketView
	for i := range tickets {
		if tickets[i].Node == at.Node {
			mine = &tickets[i]
		}
	}
	ahead := 0
	for _, t := range tickets {
		if t.Kind == "group" && t.Group == at.Group && t.Node != at.Node && t.created < at.SeatRevision {
			ahead++
		}
	}
	if ahead >= free {
		return "", false
	}
	if limitTotal, what := m.total(at.Node, nil); limitTotal > 0 {
		limitTotal, _ = m.capped(limitTotal, what, "", func(slotView) bool { return true }, true)
		freeTotal := limitTotal - len(total)
		ahead = 0
		for _, t := range tickets {
			if t.Kind == "" && t.Node != at.Node && (mine == nil || t.created < mine.created) {
				ahead++
			}
		}
		if freeTotal <= 0 || ahead >= freeTotal {
			return "", false
		}
	}
	why := fmt.Sprintf("max_holders %s, counted %s; no pause, halt, hold or conflict; failures within max_failures %d",
		limitWhat, describe(others), m.r.MaxFailures)
	if at.Wave > 0 {
		why += fmt.Sprintf("; nothing of a wave below %d busy", at.Wave)
	}
	if m.r.Policy.active() {
		why += "; the cluster policies allow it: " + policed
	}
	return why, true
}
