package slot

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// The rules of the admission, in the order Decide applies them
// (docs/rollout.md, "The rules"). Each is also the Verdict's Rule when it
// says no.
const (
	RuleConflict    = "conflict"
	RulePaused      = "paused"
	RuleHalted      = "halted"
	RuleHeld        = "held"
	RuleWave        = "wave"
	RulePolicy      = "policy"
	RuleMaxHolders  = "max_holders"
	RuleMaxTotal    = "max_holders_total"
	RuleMinInterval = "min_interval"
	RuleRate        = "max_starts_per_hour"
)

// Rules lists every rule, in Decide's order.
func Rules() []string {
	return []string{RuleConflict, RulePaused, RuleHalted, RuleHeld, RuleWave, RulePolicy,
		RuleMaxHolders, RuleMaxTotal, RuleMinInterval, RuleRate}
}

func refuse(v slotinfo.Verdict, rule string, code exitcode.Code, format string, args ...any) slotinfo.Verdict {
	v.Rule, v.Code, v.Reason = rule, code, fmt.Sprintf(format, args...)
	return v
}

func wait(v slotinfo.Verdict, rule, format string, args ...any) slotinfo.Verdict {
	v.Wait = true
	return refuse(v, rule, exitcode.HealthBlocked, format, args...)
}

// Decide applies every rule to the count, in the order of Rules(): the
// first that says no decides. It is a pure function of the count, this
// node's Fleet and its clock.
func (f Fleet) Decide(c Count) slotinfo.Verdict {
	v := slotinfo.Verdict{}
	v.GroupNodes, v.FleetNodes = f.scopes(c)
	v.Rules = f.effective(c, v.GroupNodes, v.FleetNodes)
	if c.Problem != nil {
		return refuse(v, RuleConflict, exitcode.Config, "%s", strings.TrimPrefix(c.Problem.Error(), "slot: "))
	}
	if msg := f.mineConflict(c); msg != "" {
		return refuse(v, RuleConflict, exitcode.Config, "%s", msg)
	}
	// The failure budget is looked at whatever else says no: a budget spent
	// during a pause still records its halt (Verdict.HaltNew).
	hv := f.halted(c, v)
	v.Failures, v.HaltNew = hv.Failures, hv.HaltNew
	if p := c.View.Paused; p != nil {
		return refuse(v, RulePaused, exitcode.KillSwitch, "reboots are paused cluster-wide (%s, by %s since %s): run `clusterrebootd resume` to allow them",
			p.Reason, p.By, stamp(p.Since))
	}
	if hv.Rule != "" {
		return hv
	}
	if h := c.Hold; h != nil {
		return refuse(v, RuleHeld, exitcode.KillSwitch, "node %s is held (%s, by %s since %s); nothing was rebooted: run `clusterrebootd release-hold %s` to allow its reboot",
			f.Node, h.Reason, h.By, stamp(h.Since), f.Node)
	}
	if v = f.waves(c, v); v.Rule != "" {
		return v
	}
	var d policy.Decision
	switch {
	case c.Summary != nil:
		// The same rules on the count's summary (count-only reads at its
		// revision): every slot counted down (lib/slot TestSummaryIsTheViews).
		d = policy.EvaluateSummary(*c.Summary, f.Node, f.Policies)
	case c.Records:
		d = policy.Evaluate(c.View, f.Node, f.Policies)
	case policy.Active(f.Policies):
		// Count reads the summary whenever a policy is active: a Count
		// without it cannot decide one.
		d = policy.Decision{Rule: policy.RuleClusterView, Reason: "the fleet was counted without its summary; policies cannot be checked", FallbackUp: []string{}}
	default:
		// No policy, and nothing needed the fleet's size: not counted
		// (cluster_size 0, the gate's CLUSTER_SIZE empty).
		d = policy.Decision{Allowed: true, Reason: "no cluster policy configured", FallbackUp: []string{}}
	}
	v.Policy = &d
	if !d.Allowed {
		return refuse(v, RulePolicy, exitcode.HealthBlocked, "policy %s: %s", d.Rule, d.Reason)
	}
	if v = f.groupBudget(c, v); v.Rule != "" {
		return v
	}
	if v = f.fleetBudget(c, v); v.Rule != "" {
		return v
	}
	if v = f.pacing(c, v); v.Rule != "" {
		return v
	}
	v.Admit = true
	return v
}

// scopes counts the nodes known in this node's group and in the fleet: the
// health records and the slots, this node included.
func (f Fleet) scopes(c Count) (group, fleet int) { return f.scopesOf(c, true) }

// scopesOf counts the nodes known in f.Group and in the fleet; self says
// whether this node is of f.Group.
func (f Fleet) scopesOf(c Count, self bool) (group, fleet int) {
	if !c.Records && c.Sizes != nil && self {
		// A percentage is in effect, counted in the index (Fleet.fleetCounts).
		return c.Sizes.Group, c.Sizes.Fleet
	}
	if !c.Records {
		// No percentage is in effect (Count counts the scopes or reads
		// every record when one is): the scopes resolve nothing; the
		// fleet's size is the count of its records, 0 when it was not
		// counted (summarized).
		if c.RecordCount == 0 {
			return 0, 0
		}
		return c.RecordCount, c.RecordCount
	}
	inGroup, all := map[string]bool{}, map[string]bool{f.Node: true}
	if self {
		inGroup[f.Node] = true
	}
	for _, r := range c.View.Nodes {
		all[r.Node] = true
		if r.Group == f.Group {
			inGroup[r.Node] = true
		}
	}
	for _, s := range c.Slots {
		all[s.Node] = true
		if s.Counts(f.Lock, f.Group) {
			inGroup[s.Node] = true
		}
	}
	return len(inGroup), len(all)
}

// effective is the strictest of this entry point's rules and those the
// live records and slots carry (docs/rollout.md, "Whose rules").
func (f Fleet) effective(c Count, groupNodes, fleetNodes int) policy.Effective {
	e := f.rulesOf(c, f.Rules.Resolve(groupNodes, fleetNodes), groupNodes, fleetNodes)
	// The numbers older slots and the line's seats carry.
	if c.SeatMax > 0 && c.SeatMax < e.MaxHolders {
		e.MaxHolders = c.SeatMax
	}
	if c.SlotMax > 0 && c.SlotMax < e.MaxHolders {
		e.MaxHolders = c.SlotMax
	}
	e.MaxTotal = smallestOn(e.MaxTotal, c.SlotMaxTotal)
	e.MaxHolders = max(1, e.MaxHolders)
	return e
}

// rulesOf is the strictest of e (this entry point's rules) and the rules
// the live records and slots carry, for f.Group.
func (f Fleet) rulesOf(c Count, e policy.Effective, groupNodes, fleetNodes int) policy.Effective {
	for _, r := range c.View.Nodes {
		if r.Rules != nil && r.Node != f.Node {
			e = e.Stricter(r.Rules.Resolve(groupNodes, fleetNodes), r.Group == f.Group)
		}
	}
	for _, r := range c.RuleSets {
		e = e.Stricter(r.Rules.Resolve(groupNodes, fleetNodes), r.Group == f.Group)
	}
	for _, s := range c.Slots {
		if s.Rules != nil {
			e = e.Stricter(s.Rules.Resolve(groupNodes, fleetNodes), s.Counts(f.Lock, f.Group))
		}
	}
	return e
}

// RulesFor are the effective rules of group as the count shows them, and
// the group's node count its percentages were resolved against: for this
// node's group, the admission's own (Decide's Verdict.Rules); for another
// group, the strictest of the rules its live records and slots carry (this
// entry point's own group rules only when none carries any: they are its
// group's) and the fleet's rules of every record and slot; its line's
// seats are not in the count. For the rollout's estimate: no admission
// decides on it.
func (f Fleet) RulesFor(c Count, group string) (e policy.Effective, groupNodes int) {
	if group == f.Group {
		groupNodes, fleetNodes := f.scopes(c)
		return f.effective(c, groupNodes, fleetNodes), groupNodes
	}
	g := f
	g.Group = group
	groupNodes, fleetNodes := g.scopesOf(c, false)
	base := f.Rules.Resolve(groupNodes, fleetNodes)
	if o := groupRules(c, f.Lock, group); o != nil {
		r := o.Resolve(groupNodes, fleetNodes)
		base.MaxHolders, base.MinIntervalSec = r.MaxHolders, r.MinIntervalSec
	}
	e = g.rulesOf(c, base, groupNodes, fleetNodes)
	for _, s := range c.Slots {
		if s.Counts(f.Lock, group) && s.MaxHolders > 0 && s.MaxHolders < e.MaxHolders {
			e.MaxHolders = s.MaxHolders
		}
	}
	e.MaxTotal = smallestOn(e.MaxTotal, c.SlotMaxTotal)
	e.MaxHolders = max(1, e.MaxHolders)
	return e, groupNodes
}

// groupRules are the rules of the first live record, else slot, of group
// that carries any (nil: none).
func groupRules(c Count, lock, group string) *policy.Rules {
	for _, r := range c.View.Nodes {
		if r.Group == group && r.Rules != nil {
			return r.Rules
		}
	}
	for _, r := range c.RuleSets {
		if r.Group == group {
			rules := r.Rules
			return &rules
		}
	}
	for _, s := range c.Slots {
		if s.Bound && s.Lock == lock && s.Group == group && s.Rules != nil {
			return s.Rules
		}
	}
	return nil
}

// mineConflict names a slot under this node's name that is not this
// boot's: it counts as another machine's, and taking it would be refused
// for as long as it lives.
func (f Fleet) mineConflict(c Count) string {
	m := c.Mine
	if m == nil || (m.Bound && m.BootID == f.BootID && f.BootID != "" && m.Lock == f.Lock && m.Group == f.Group) {
		return ""
	}
	ttl := fmt.Sprintf("it expires with its lease (reboot_slot_ttl_sec, taken %s)", stamp(m.Since))
	switch {
	case !m.Bound:
		return fmt.Sprintf("the reboot slot %s holds a value that names no lock or group (an older version's or a foreign writer's); %s, or delete it after checking: etcdctl del %s", m.Key, ttl, m.Key)
	case m.Lock == f.Lock && m.Group != f.Group:
		return fmt.Sprintf("the reboot slot %s is held in group %q, this node's group is %q: every node needs a unique name across groups; %s", m.Key, m.Group, f.Group, ttl)
	case strings.HasPrefix(m.BootID, "fleetlock:") && !strings.HasPrefix(f.BootID, "fleetlock:"):
		return fmt.Sprintf("the reboot slot %s is a FleetLock client's with this node's name (id %s): give the client another id; %s", m.Key, strings.TrimPrefix(m.BootID, "fleetlock:"), ttl)
	case m.MachineID != "" && m.MachineID == f.MachineID:
		return fmt.Sprintf("the reboot slot %s has this machine's id but another boot's (%s): this machine's earlier reboot that was never completed (run `crd-lock complete` here if state_dir holds its claim), or another machine cloned with the same /etc/machine-id and name; %s, or delete it after checking: etcdctl del %s",
			m.Key, orUnknown(m.BootID), ttl, m.Key)
	}
	return fmt.Sprintf("the reboot slot %s is held by another machine named %s (boot id %s): every node needs a unique name; %s", m.Key, f.Node, orUnknown(m.BootID), ttl)
}

// halted is the failure budget: a recorded halt, or failures in the window
// that reach max_failures, in this node's scope.
func (f Fleet) halted(c Count, v slotinfo.Verdict) slotinfo.Verdict {
	e := v.Rules
	v.Failures = f.Failures(c, e)
	if h := c.Rollout.HaltOf(f.Group); h != nil {
		return refuse(v, RuleHalted, exitcode.KillSwitch, "the rollout halted itself: %s (since %s): look at the failed nodes, then run `%s`", h.Reason, stamp(h.Since), ResumeHint(h.Scope, h.Group))
	}
	if e.MaxFailures == 0 || len(v.Failures) < e.MaxFailures {
		return v
	}
	v.HaltNew = true
	return refuse(v, RuleHalted, exitcode.KillSwitch, "the rollout halted itself: %s: look at the failed nodes, then run `%s`", HaltReason(v.Failures, e), ResumeHint(e.FailureScope, f.Group))
}

// ResumeHint is the command that ends a halt of scope: `clusterrebootd
// resume --reason TEXT`, with --group for a group's.
func ResumeHint(scope, group string) string {
	if scope == config.ScopeGroup {
		return fmt.Sprintf("clusterrebootd resume --group %q --reason TEXT", group)
	}
	return "clusterrebootd resume --reason TEXT"
}

// HaltReason is the halt's one line: the budget and every failed node with
// its kind.
func HaltReason(fs []slotinfo.Failure, e policy.Effective) string {
	parts := make([]string, 0, len(fs))
	for _, x := range fs {
		parts = append(parts, fmt.Sprintf("%s (%s: %s)", x.Node, x.Kind, x.Detail))
	}
	scope := "the fleet"
	if e.FailureScope == config.ScopeGroup && len(fs) > 0 {
		scope = groupName(fs[0].Group)
	}
	return fmt.Sprintf("%d failure(s) in %s within %s reached max_failures %d: %s", len(fs), scope, time.Duration(e.FailureWindowSec)*time.Second, e.MaxFailures, strings.Join(parts, "; "))
}

// Failures are the failures counting against this node's budget: failure
// records, and reboots whose slot is gone while their in-flight record
// lives, that the last resume did not acknowledge, of this node's scope,
// one per node (the first).
func (f Fleet) Failures(c Count, e policy.Effective) []slotinfo.Failure {
	seen := map[string]bool{}
	out := []slotinfo.Failure{}
	for _, x := range FailuresInWindow(c) {
		if c.Rollout.Ack.Acks(f.NS, x) || seen[x.Node] || (e.FailureScope == config.ScopeGroup && x.Group != f.Group) {
			continue
		}
		seen[x.Node] = true
		out = append(out, x)
	}
	return out
}

// FailuresInWindow are every failure the count sees, of every node and
// scope, acknowledged by a resume or not, oldest first: the failure records
// and the reboots whose slot is gone while their in-flight record lives.
// Each lives as long as the failure window (an in-flight record is renewed
// with its slot, so it outlives the slot by the window: the failure is
// dated from the slot's end). The budget counts Failures.
//
// A reboot whose slot is gone is a failure whatever any other record says:
// a health record names its node's boot for up to three publish intervals
// after the node went down, so it proves nothing (before protocol 3 such a
// record excused the reboot, and the next node was admitted while the lost
// one was still down).
func FailuresInWindow(c Count) []slotinfo.Failure {
	slots := map[string]int64{}
	for _, s := range c.Slots {
		slots[s.Node] = s.Lease
	}
	var all []slotinfo.Failure
	all = append(all, c.Rollout.Failures...)
	for _, in := range c.Rollout.Inflight {
		if lease, ok := slots[in.Node]; ok && fmt.Sprintf("%x", lease) == in.Lease {
			continue // still in its slot
		}
		at := in.Since.Add(time.Duration(in.TTLSec) * time.Second)
		detail := fmt.Sprintf("its reboot slot (taken %s by the %s, reboot_slot_ttl_sec %d) ran out before it completed", stamp(in.Since), orUnknown(in.Via), in.TTLSec)
		if in.V >= 3 && !in.Started && in.Via != ViaFleetLock {
			detail += "; its reboot command had not started (the node stopped, froze or was cut off while it prepared its reboot)"
		}
		all = append(all, slotinfo.Failure{Node: in.Node, Group: in.Group, Wave: in.Wave, Kind: FailureSlotExpired, At: at, Key: in.Key, CreateRevision: in.CreateRevision, ID: in.ID(), Detail: detail})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].CreateRevision < all[j].CreateRevision })
	return all
}

// waves: a node of wave k waits for every lower wave (docs/rollout.md,
// "Waves and canaries").
func (f Fleet) waves(c Count, v slotinfo.Verdict) slotinfo.Verdict {
	if f.Wave == 0 {
		return v
	}
	timeout := time.Duration(v.Rules.WaveTimeoutSec) * time.Second
	held := map[string]bool{}
	for _, h := range c.View.Holds {
		held[h.Node] = true
	}
	var pending, timedOut []string
	nodes := c.View.Nodes
	if !c.Records {
		nodes = c.Lower // the busy index's (Fleet.lowerWaves)
	}
	for _, r := range nodes {
		if r.Wave >= f.Wave || r.Node == f.Node || held[r.Node] || !Busy(r) {
			continue
		}
		// How long it has needed its reboot is etcd's measure (its
		// record's needs lease, Count.NeedAge), never a comparison of this
		// node's clock with the time another node wrote: a record without
		// one (an older version's) never times out.
		if age, ok := c.NeedAge[r.Node]; ok && timeout > 0 && age > timeout && r.State != policy.StateRebooting && r.State != policy.StatePostReboot {
			timedOut = append(timedOut, fmt.Sprintf("%s (wave %d, needs it for %s)", r.Node, r.Wave, age.Round(time.Second)))
			continue
		}
		pending = append(pending, fmt.Sprintf("%s (wave %d, %s)", r.Node, r.Wave, r.State))
	}
	for _, s := range c.Slots {
		if s.Wave < f.Wave && s.Node != f.Node {
			pending = append(pending, fmt.Sprintf("%s (wave %d, rebooting)", s.Node, s.Wave))
		}
	}
	sort.Strings(pending)
	if len(pending) > 0 {
		more := ""
		if len(timedOut) > 0 {
			more = "; no longer waited for (longer than wave_timeout_sec): " + strings.Join(timedOut, ", ")
		}
		return refuse(v, RuleWave, exitcode.HealthBlocked, "wave %d waits for the lower waves: %s still need their reboot%s", f.Wave, strings.Join(pending, ", "), more)
	}
	for _, m := range c.Rollout.WaveDone {
		if m.Wave < f.Wave {
			v.Marks = append(v.Marks, m)
		}
	}
	if len(v.Marks) > 0 {
		return refuse(v, RuleWave, exitcode.HealthBlocked, "wave %d waits wave_bake_sec (%d s) after the lower waves' last completion (%s, wave %d, at %s)",
			f.Wave, v.Rules.WaveBakeSec, v.Marks[0].Node, v.Marks[0].Wave, stamp(v.Marks[0].Since))
	}
	return v
}

// groupBudget is max_holders. Daemons and pipelines wait for it under their
// seat of the group's line, in the line's order; a FleetLock client cannot
// (it asks, and is answered within a request), so it keeps a group ticket
// while it waits, and a ticket older than a candidate's seat goes first: a
// daemon or pipeline that finds room only for the FleetLock clients that
// asked before it joined the line is refused, gives up its seat and asks
// again on its next cycle (docs/fleetlock.md, "Fairness inside a group").
func (f Fleet) groupBudget(c Count, v slotinfo.Verdict) slotinfo.Verdict {
	limit := v.Rules.MaxHolders
	free := limit - (len(c.Members) - 1)
	fleetlock := f.Via == ViaFleetLock
	pct := percentOf(f.Rules.MaxHolders, v.GroupNodes)
	if free <= 0 {
		v.Ticket, v.TicketKind = fleetlock, TicketGroup
		return wait(v, RuleMaxHolders, "other nodes of %s are rebooting (%s; max_holders %d%s)",
			groupName(f.Group), describe(c.Members[1:]), limit, pct)
	}
	mine := c.ticketOf(f.Node)
	var ahead []string
	for _, t := range c.Tickets {
		if t.Kind != TicketGroup || t.Group != f.Group || t.Node == f.Node {
			continue
		}
		older := true
		switch {
		case fleetlock && mine != nil:
			older = t.CreateRevision < mine.CreateRevision
		case !fleetlock && c.SeatRev != 0:
			older = t.CreateRevision < c.SeatRev
		}
		if older {
			ahead = append(ahead, fmt.Sprintf("%s (since %s)", t.Node, stamp(t.Since)))
		}
	}
	if len(ahead) < free {
		return v
	}
	if fleetlock {
		v.Ticket, v.TicketKind = true, TicketGroup
		return wait(v, RuleMaxHolders, "%s has room for %d (max_holders %d%s), and %d FleetLock client(s) of it asked longer: %s",
			groupName(f.Group), free, limit, pct, len(ahead), strings.Join(ahead, ", "))
	}
	v.Yield = true
	return refuse(v, RuleMaxHolders, exitcode.HealthBlocked, "%s has room for %d (max_holders %d%s), and %d FleetLock client(s) of it asked before this node joined the line: %s; they go first: this node gives its lock seat up and asks again later",
		groupName(f.Group), free, limit, pct, len(ahead), strings.Join(ahead, ", "))
}

// ticketOf is node's ticket (nil: none).
func (c Count) ticketOf(node string) *Ticket {
	for i := range c.Tickets {
		if c.Tickets[i].Node == node {
			return &c.Tickets[i]
		}
	}
	return nil
}

// fleetBudget is max_holders_total, with the fleet's line: the nodes that
// waited for it longer go first.
func (f Fleet) fleetBudget(c Count, v slotinfo.Verdict) slotinfo.Verdict {
	limit := v.Rules.MaxTotal
	if limit == 0 {
		return v
	}
	free := limit - (len(c.Total) - 1)
	mine := c.ticketOf(f.Node)
	var ahead, needSeat []string
	for _, t := range c.Tickets {
		if t.Kind != TicketFleet {
			continue
		}
		if t.Node != f.Node && (mine == nil || t.CreateRevision < mine.CreateRevision) {
			ahead = append(ahead, fmt.Sprintf("%s (%s)", t.Node, groupName(t.Group)))
			if t.Via == ViaFleetLock && t.Group == f.Group {
				needSeat = append(needSeat, t.Node)
			}
		}
	}
	pct := percentOf(f.Rules.MaxTotal, v.FleetNodes)
	switch {
	case free > 0 && len(ahead) >= free && len(needSeat) > 0 && f.Via != ViaFleetLock:
		// A FleetLock client of this group ahead needs a seat of the
		// group's line to take its turn: waiting under this one would
		// keep it out for good.
		v.Yield = true
		return refuse(v, RuleMaxTotal, exitcode.HealthBlocked, "the fleet's budget (max_holders_total %d%s) has room for %d, and %d node(s) waited for it longer: %s; FleetLock client(s) of %s among them need this node's lock seat: it gives the seat up and asks again later",
			limit, pct, free, len(ahead), strings.Join(ahead, ", "), groupName(f.Group))
	case free <= 0:
		v.Ticket, v.TicketKind = true, TicketFleet
		return wait(v, RuleMaxTotal, "%d nodes are rebooting across the fleet (%s; max_holders_total %d%s)",
			len(c.Total)-1, describe(c.Total[1:]), limit, pct)
	case len(ahead) >= free:
		v.Ticket, v.TicketKind = true, TicketFleet
		return wait(v, RuleMaxTotal, "the fleet's budget (max_holders_total %d%s) has room for %d, and %d node(s) waited for it longer: %s",
			limit, pct, free, len(ahead), strings.Join(ahead, ", "))
	}
	return v
}

// pacing is min_interval_sec per group and max_starts_per_hour for the
// fleet, both timed by the leases of their records.
func (f Fleet) pacing(c Count, v slotinfo.Verdict) slotinfo.Verdict {
	if v.Rules.MinIntervalSec > 0 {
		for _, m := range c.Rollout.Paced {
			if m.Group == f.Group {
				v.Marks = append(v.Marks, m)
			}
		}
		if len(v.Marks) > 0 {
			return wait(v, RuleMinInterval, "a reboot of %s started at %s (%s); min_interval_sec is %d", groupName(f.Group), stamp(v.Marks[0].Since), v.Marks[0].Node, v.Rules.MinIntervalSec)
		}
	}
	if rate := v.Rules.MaxStartsPerHour; rate > 0 && c.Rollout.StartCount >= rate {
		// The oldest starts end first: the wait is until one of them does.
		v.Marks = append(v.Marks, c.Rollout.Starts...)
		return wait(v, RuleRate, "%d reboots started across the fleet within the last hour; max_starts_per_hour is %d", c.Rollout.StartCount, rate)
	}
	return v
}

func groupName(g string) string {
	if g == "" {
		return "the ungrouped fleet"
	}
	return "group " + g
}

func percentOf(b config.Budget, nodes int) string {
	if b.Percent == 0 {
		return ""
	}
	return fmt.Sprintf(" = %d%% of %d nodes", b.Percent, nodes)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

func describe(ms []Member) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s(%s)", m.Node, m.Via))
	}
	return strings.Join(parts, ",")
}
