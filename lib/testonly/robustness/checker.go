package robustness

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Rules are what the checker holds a history to: the namespace and the
// lock, and the budgets every node of the run was configured with.
type Rules struct {
	// NS is the namespace ("/…/"), Lock the lock key (without a group).
	NS, Lock string
	// MaxHolders is max_holders of every group, MaxTotal
	// max_holders_total (0: none), MaxFailures max_failures (0: off).
	MaxHolders, MaxTotal, MaxFailures int
	// HoldersPct, when not 0, makes max_holders that percentage of the
	// nodes known in the group, TotalPct max_holders_total that of the
	// nodes known in the fleet (MaxHolders and MaxTotal are then unused):
	// model.holders.
	HoldersPct, TotalPct int
	// GroupScope: failure_scope group (else fleet).
	GroupScope bool
	// Policy is the built-in cluster policies.
	Policy PolicyRules
	// Paced: rollout.min_interval_sec is set (its marks end only by a
	// fault during a run).
	Paced bool
	// Rate is max_starts_per_hour (0: none; its start records end only by
	// a fault during a run).
	Rate int
}

// The invariants the checker asserts.
const (
	// InvMaxHolders: never more than max_holders slots in a group.
	InvMaxHolders = "max_holders"
	// InvMaxTotal: never more than max_holders_total slots in the fleet.
	InvMaxTotal = "max_holders_total"
	// InvBusy: a slot is taken only while its group's slots and the plain
	// seats that held the lock since before its count stay within
	// max_holders.
	InvBusy = "max_holders with plain seats"
	// InvBudget: no slot while the failures of its scope (losses and
	// failure records, one per node, less those a resume acknowledged by
	// name after they happened) reach max_failures, or while a halt stands.
	InvBudget = "failure budget"
	// InvPause: no slot while reboots are paused.
	InvPause = "pause"
	// InvHold: no slot for a held node.
	InvHold = "hold"
	// InvOneMachine: a slot is never taken over by another boot or machine
	// of its name.
	InvOneMachine = "one machine per name"
	// InvLiveness: a candidate whom nothing holds back is admitted when it
	// asks.
	InvLiveness = "liveness"
	// InvPolicy: no slot is taken while the built-in policies forbid its
	// node to go down: its slot counted down, enough of the members stay
	// healthy, and a fallback node leaves another fallback node healthy.
	// Judged on the state after the take: between a count and its take a
	// node becomes less healthy only by a reboot, which takes a slot (a
	// slot still there refuses the take) or has completed by then (a
	// record that still says rebooting after its node's completion is
	// stale, and the node up); any other change of a record makes it
	// healthier (an idle record before a node's first cycle or after its
	// completion), and a record that runs out (FaultEndRecord) is a lost
	// node's, which said rebooting: one member fewer, none less healthy.
	InvPolicy = "cluster policies"
	// InvAckScope: a resume of one group (`resume --group`) acknowledges
	// that group's failures and those an earlier resume acknowledged,
	// never another group's new one.
	InvAckScope = "a group's resume acknowledges only its group"
	// InvPacing: no slot is taken in a group while a pacing mark of that
	// group lives (<ns>rollout/paced/<node>, on a lease of
	// min_interval_sec from an earlier take of the group).
	InvPacing = "min_interval_sec"
	// InvRate: no slot is taken while as many start records live as
	// max_starts_per_hour allows (<ns>rollout/starts/, each on a lease of
	// an hour from a take).
	InvRate = "max_starts_per_hour"
	// InvWave: a node of wave k is admitted only on a count that saw no
	// node of a lower wave hold it back (model.waveHeld). Judged at the
	// count's revision, not the take's: the take guards the slots and the
	// wave-completion records, not the records (a lower-wave node that
	// comes to need its reboot after the count is a later need, as if it
	// had published after the take).
	InvWave = "waves"
)

// Violation is an invariant the history breaks.
type Violation struct {
	Invariant string
	// Revision is where it breaks.
	Revision int64
	// Detail says what is wrong, Excerpt is the history up to it.
	Detail, Excerpt string
	// Known names the known defect that explains it (KnownReusedName),
	// "" for any other.
	Known string
}

// KnownReusedName explains a budget violation whose loss carries a name a
// resume had acknowledged before it happened: the defect this suite found
// at 0b9ae7d (a take writes its node's in-flight record over an earlier
// one, which keeps its create revision, and losses were named by it; they
// are named by their slot's lease since). A recurrence fails every run
// (TestSecondLossAfterAResumeHalts).
const KnownReusedName = "a later loss under an acknowledged name (the in-flight record keeps its create revision)"

// String is the violation as a failing run prints it.
func (v Violation) String() string {
	return fmt.Sprintf("VIOLATION of %q at revision %d: %s\n  etcd's history up to it:\n%s", v.Invariant, v.Revision, v.Detail, v.Excerpt)
}

// checker walks a history revision by revision.
type checker struct {
	m      *model
	events []Event
	takes  []Take
	out    []Violation
	stats  Stats
	judged map[string]bool
	// counted is, with a percentage, the state at each take's count, by
	// the take's revision and node (takeKey).
	counted map[string]atCount
}

func takeKey(rev int64, node string) string { return fmt.Sprintf("%d|%s", rev, node) }

// Stats say what a history holds: how much of the rules it exercised.
type Stats struct {
	// Takes are slots taken, Completions slots freed with their in-flight
	// record, Losses reboots lost (slots ended while their record lived),
	// Halts halts recorded, Resumes acknowledgements written (GroupResumes
	// of them by a resume of one group), Judged the admissions judged for
	// liveness (those not admitted), Policed the takes judged against a
	// built-in policy, Paced the refusals by min_interval_sec or
	// max_starts_per_hour, LaterWaves the admissions of a node of a wave
	// above 0 judged against the waves, Waited the refusals by the waves
	// (Baked of them while a lower wave's completion baked: wave_bake_sec),
	// RecordsEnded the health records that ran out (FaultEndRecord).
	Takes, Completions, Losses, Halts, Resumes, Judged, Policed, GroupResumes, Paced, LaterWaves, Waited, Baked, RecordsEnded int
}

// Add sums two stats.
func (s Stats) Add(o Stats) Stats {
	return Stats{s.Takes + o.Takes, s.Completions + o.Completions, s.Losses + o.Losses, s.Halts + o.Halts, s.Resumes + o.Resumes,
		s.Judged + o.Judged, s.Policed + o.Policed, s.GroupResumes + o.GroupResumes, s.Paced + o.Paced, s.LaterWaves + o.LaterWaves, s.Waited + o.Waited, s.Baked + o.Baked, s.RecordsEnded + o.RecordsEnded}
}

// String is the stats in one line.
func (s Stats) String() string {
	return fmt.Sprintf("%d takes (%d under a cluster policy), %d completions, %d losses, %d halts, %d resumes (%d of one group), %d refusals judged for liveness (%d paced, %d by the waves, %d of them baking), %d admissions of a later wave, %d health records ended",
		s.Takes, s.Policed, s.Completions, s.Losses, s.Halts, s.Resumes, s.GroupResumes, s.Judged, s.Paced, s.Waited, s.Baked, s.LaterWaves, s.RecordsEnded)
}

// Check replays events (a namespace's history, in revision order) and
// returns the invariants they break; attempts (the candidates' admissions
// and the revisions they counted at) are judged for liveness on the way.
// takes (the count each take was decided on) explain a violation, and with a
// percentage say which nodes a take's count knew (model.holders).
func Check(r Rules, events []Event, attempts []Attempt, takes []Take) ([]Violation, Stats) {
	c := &checker{m: newModel(r), events: events, takes: takes, judged: map[string]bool{}, counted: map[string]atCount{}}
	att := append([]Attempt(nil), attempts...)
	sort.SliceStable(att, func(i, j int) bool { return att[i].Revision < att[j].Revision })
	byCount := append([]Take(nil), takes...)
	sort.SliceStable(byCount, func(i, j int) bool { return byCount[i].Count < byCount[j].Count })
	next, nextTake := 0, 0
	// counted: the state at each take's count, which is the state before
	// the first revision after it.
	counted := func(before int64) {
		for ; r.percent() && nextTake < len(byCount) && byCount[nextTake].Count < before; nextTake++ {
			t := byCount[nextTake]
			c.counted[takeKey(t.Revision, t.Node)] = c.m.snapshot()
		}
	}
	for i := 0; i < len(events); {
		rev := events[i].Revision
		j := i
		for j < len(events) && events[j].Revision == rev {
			j++
		}
		for next < len(att) && att[next].Revision < rev {
			c.live(att[next])
			next++
		}
		counted(rev)
		c.revision(rev, events[i:j])
		i = j
	}
	for ; next < len(att); next++ {
		c.live(att[next])
	}
	c.stats.Losses = len(c.m.lost)
	return c.out, c.stats
}

// Notes are what the checker saw that breaks nothing but is worth a line
// (a loss given back by its node).
func Notes(r Rules, events []Event) []string {
	c := &checker{m: newModel(r), events: events}
	for i := 0; i < len(events); {
		j := i
		for j < len(events) && events[j].Revision == events[i].Revision {
			j++
		}
		c.revision(events[i].Revision, events[i:j])
		i = j
	}
	return c.m.notes
}

func (c *checker) violate(inv string, rev int64, format string, args ...any) {
	c.out = append(c.out, Violation{Invariant: inv, Revision: rev, Detail: fmt.Sprintf(format, args...),
		Excerpt: excerpt(c.events, c.m.r.NS, rev-12, rev)})
}

// revision applies one revision's events (one transaction's) and checks
// them.
func (c *checker) revision(rev int64, evs []Event) {
	m := c.m
	slotDir := m.slotDir()
	since := m.lastChange
	type take struct {
		ev    Event
		slot  slotView
		plain map[string]string
	}
	var takes []take
	for _, ev := range evs {
		if ev.Delete || !strings.HasPrefix(ev.Key, slotDir) || (ev.Prev != nil && ev.Prev.Lease == ev.Lease) {
			continue
		}
		s := readSlot(ev.Key, KV{Value: ev.Value, Lease: ev.Lease, CreateRevision: ev.CreateRevision}, m.r.NS)
		c.stats.Takes++
		c.beforeTake(rev, ev, s)
		takes = append(takes, take{ev: ev, slot: s, plain: m.plainHolders(s.Group, since)})
	}
	changed := false
	slotsGone, recordsGone := map[string]bool{}, map[string]bool{}
	for _, ev := range evs {
		switch {
		case ev.Delete && strings.HasPrefix(ev.Key, slotDir):
			slotsGone[strings.TrimPrefix(ev.Key, slotDir)] = true
		case ev.Delete && strings.HasPrefix(ev.Key, m.inflightDir()):
			recordsGone[strings.TrimPrefix(ev.Key, m.inflightDir())] = true
		case ev.Delete && strings.HasPrefix(ev.Key, m.r.NS+"nodes/"):
			c.stats.RecordsEnded++
		case !ev.Delete && ev.Prev == nil && (strings.HasPrefix(ev.Key, m.r.NS+"rollout/halts/") || ev.Key == m.r.NS+"rollout/halted"):
			c.stats.Halts++
		case !ev.Delete && ev.Key == m.r.NS+"rollout/ack":
			c.stats.Resumes++
			c.ackScope(rev, ev.Value)
		}
		m.apply(ev)
		if strings.HasPrefix(ev.Key, slotDir) || (!ev.Delete && strings.HasPrefix(ev.Key, m.inflightDir())) {
			changed = true
		}
	}
	var taken []slotView
	for _, t := range takes {
		c.busy(rev, t.slot, t.plain)
		c.policed(rev, t.slot.Node)
		taken = append(taken, t.slot)
	}
	for node := range slotsGone {
		if recordsGone[node] {
			c.stats.Completions++
		}
	}
	for _, ev := range evs {
		if ev.Delete && strings.HasPrefix(ev.Key, m.inflightDir()) {
			m.withdraw(ev, rev)
		}
	}
	m.orphans(rev)
	m.markHolders(rev)
	c.counts(rev, taken)
	if changed {
		m.lastChange = rev
	}
}

// ackScope checks an acknowledgement written at rev, against the failures
// before it: a resume of one group names no failure of another group that
// no earlier resume acknowledged.
func (c *checker) ackScope(rev int64, value []byte) {
	var a ackView
	if json.Unmarshal(value, &a) != nil {
		return
	}
	group, ok := strings.CutPrefix(a.Scope, "group:")
	if !ok {
		return
	}
	c.stats.GroupResumes++
	a.written = rev
	for _, f := range c.m.failures() {
		if f.group != group && a.names(f.id) && !c.m.acked(f) {
			c.violate(InvAckScope, rev, "a resume of group %q acknowledged %s of group %q, which no earlier resume acknowledged: that group's failures must keep counting", group, f.id, f.group)
		}
	}
}

// beforeTake checks a slot being taken at rev against the state before it.
func (c *checker) beforeTake(rev int64, ev Event, s slotView) {
	m := c.m
	if ev.Prev != nil {
		p := readSlot(ev.Key, *ev.Prev, m.r.NS)
		if p.BootID != s.BootID || p.MachineID != s.MachineID {
			c.violate(InvOneMachine, rev, "the slot of %s (boot %s, machine %s) was taken over by boot %s, machine %s: two machines of one name both hold a reboot",
				s.Node, p.BootID, p.MachineID, s.BootID, s.MachineID)
		}
	}
	if m.paused() {
		c.violate(InvPause, rev, "%s took a slot while reboots were paused (<ns>disable)", s.Node)
	}
	if m.held(s.Node) {
		c.violate(InvHold, rev, "%s took a slot while it was held (<ns>holds/%s)", s.Node, s.Node)
	}
	if p := m.pacedBy(s.Group); m.r.Paced && p != "" {
		c.violate(InvPacing, rev, "%s took a slot in group %q while %s's pacing mark of that group lived (<ns>rollout/paced/%s: min_interval_sec)", s.Node, s.Group, p, p)
	}
	if n := m.starts(); m.r.Rate > 0 && n >= m.r.Rate {
		c.violate(InvRate, rev, "%s took a slot while %d start records lived (<ns>rollout/starts/): max_starts_per_hour is %d", s.Node, n, m.r.Rate)
	}
	if h := m.halt(s.Group); h != "" {
		c.violate(InvBudget, rev, "%s took a slot while the rollout was halted (%s)", s.Node, h)
	}
	if counted, spent := m.spent(s.Group); spent {
		var reused []string
		var at int64
		for _, f := range counted {
			if a := m.namedBefore(f); a != nil {
				reused, at = append(reused, f.id), a.written
			}
		}
		detail := fmt.Sprintf("%s took a slot while %d failure(s) reached max_failures %d and no resume acknowledged them: %s%s",
			s.Node, len(counted), m.r.MaxFailures, describeFailures(counted), c.countedAt(rev, counted))
		known := ""
		if len(reused) > 0 {
			detail += fmt.Sprintf("; the resume at revision %d had acknowledged %s, an earlier failure of that name, before this one happened (%s)",
				at, strings.Join(reused, ", "), KnownReusedName)
			if len(counted)-len(reused) < m.r.MaxFailures {
				known = KnownReusedName
			}
		}
		c.out = append(c.out, Violation{Invariant: InvBudget, Revision: rev, Detail: detail, Known: known,
			Excerpt: excerpt(c.events, c.m.r.NS, rev-12, rev)})
	}
}

// countedAt says when the take at rev was decided, against the failures
// it missed: one after its count went unseen between its count and its
// take; one before it was seen and not counted.
func (c *checker) countedAt(rev int64, fs []failure) string {
	for _, t := range c.takes {
		if t.Revision != rev {
			continue
		}
		var after, before []string
		for _, f := range fs {
			if f.at > t.Count {
				after = append(after, f.node)
			} else {
				before = append(before, f.node)
			}
		}
		s := fmt.Sprintf("; %s decided on its count at revision %d", t.Actor, t.Count)
		if len(after) > 0 {
			s += ": the loss of " + strings.Join(after, ", ") + " came between its count and its take, and the take did not see it"
		}
		if len(before) > 0 {
			s += ": its count saw the failure of " + strings.Join(before, ", ") + " and did not count it"
		}
		return s
	}
	return ""
}

// plainHolders are the seats of group's line without the candidate mark
// that have held the lock since rev or before (a count after rev saw them),
// by machine.
func (m *model) plainHolders(group string, rev int64) map[string]string {
	out := map[string]string{}
	for _, s := range m.seats() {
		if s.line == m.lineOf(group) && s.holder && !s.candidate() && m.holderSince[s.key] > 0 && m.holderSince[s.key] <= rev {
			out[s.Node+"|"+s.BootID] = fmt.Sprintf("%s (plain seat %s)", s.Node, strings.TrimPrefix(s.key, m.r.NS))
		}
	}
	return out
}

// busy checks that, with the slot taken at rev, the group's slots and the
// plain seats that held the lock before its count stay within max_holders
// (slots alone over it are InvMaxHolders).
func (c *checker) busy(rev int64, s slotView, plain map[string]string) {
	m := c.m
	who := map[string]string{}
	for _, x := range m.slots() {
		if x.counts(s.Group) {
			who[x.Node+"|"+x.BootID] = x.Node + " (slot)"
		}
	}
	for k, v := range plain {
		if _, ok := who[k]; !ok {
			who[k] = v
		}
	}
	if limit, what := m.holders(s.Group, s.Node, c.counted[takeKey(rev, s.Node)]); len(who) > limit && len(plain) > 0 {
		c.violate(InvBusy, rev, "%s took a slot of %s with %d busy at max_holders %s: %s", s.Node, groupName(s.Group), len(who), what, describe(who))
	}
}

// counts checks the slots at rev against max_holders and max_holders_total.
// Budgets that are numbers are checked at every revision. A percentage is
// checked at each take (taken: the slots taken at rev), against the nodes
// known at its count and after it (model.holders): a record's end shrinks
// the budget, but the slots taken before it stay (they are never given back
// for it), and between takes the slots only become fewer.
func (c *checker) counts(rev int64, taken []slotView) {
	m := c.m
	if !m.r.percent() {
		c.countsBy(rev, nil)
		return
	}
	for _, t := range taken {
		c.countsBy(rev, c.counted[takeKey(rev, t.Node)])
	}
}

// countsBy checks the slots at rev against max_holders and
// max_holders_total resolved by the model's state and at (a taker is known
// by its slot).
func (c *checker) countsBy(rev int64, at atCount) {
	m := c.m
	slots := m.slots()
	groups := map[string]bool{"": true}
	for _, s := range slots {
		groups[s.Group] = true
	}
	for g := range groups {
		var in []string
		for _, s := range slots {
			if s.counts(g) {
				in = append(in, s.Node)
			}
		}
		if limit, what := m.holders(g, "", at); len(in) > limit {
			c.violate(InvMaxHolders, rev, "%d slots in %s at max_holders %s: %s", len(in), groupName(g), what, strings.Join(in, ", "))
		}
	}
	if limit, what := m.total("", at); limit > 0 && len(slots) > limit {
		var in []string
		for _, s := range slots {
			in = append(in, s.Node)
		}
		c.violate(InvMaxTotal, rev, "%d slots in the fleet at max_holders_total %s: %s", len(slots), what, strings.Join(in, ", "))
	}
}

func groupName(g string) string {
	if g == "" {
		return "the ungrouped fleet"
	}
	return "group " + g
}

func describe(who map[string]string) string {
	var out []string
	for _, v := range who {
		out = append(out, v)
	}
	sort.Strings(out)
	return joinOr(out, "none")
}

func describeFailures(fs []failure) string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s [%s]", f.what, f.id))
	}
	return joinOr(out, "none")
}
