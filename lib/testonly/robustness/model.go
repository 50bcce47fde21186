package robustness

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The checker's own reading of the namespace's keys (docs/cluster-protocol.md
// "Keys and values", docs/rollout.md "Keys"): written from the documents, not
// from lib/slot, so that a misreading in the library is not repeated here.

// model is the namespace at one revision, rebuilt from the history's events.
type model struct {
	r   Rules
	kvs map[string]KV
	// holderSince is when each lock entry became a holder of its line.
	holderSince map[string]int64
	// lastChange is the last revision a slot or an in-flight record changed.
	lastChange int64
	// lost are the reboots whose in-flight record lost its slot, in the
	// order seen; acks are the resumes' acknowledgements.
	lost []*loss
	acks []ackView
	// notes say what the checker saw that breaks nothing.
	notes []string
}

// loss is an in-flight record found without its slot (deleted, or on
// another lease): a reboot that did not complete in time (docs/rollout.md,
// "The failure budget").
type loss struct {
	// id is the failure's name in an acknowledgement: <node>/<the slot
	// lease the record named> (inflightView.id). lease is that lease.
	id, node, group, lease, via, boot string
	// at is the revision the record was first seen without its slot.
	at      int64
	started bool
	// withdrawn: the node gave its in-flight record back (an abort of a
	// reboot that had not started, or a FleetLock client that asked again):
	// it was not lost.
	withdrawn bool
}

func newModel(r Rules) *model {
	return &model{r: r, kvs: map[string]KV{}, holderSince: map[string]int64{}}
}

func (m *model) apply(ev Event) {
	if !ev.Delete && ev.Key == m.r.NS+"rollout/ack" {
		m.noteAck(ev.Value, ev.Revision)
	}
	if ev.Delete {
		delete(m.kvs, ev.Key)
		delete(m.holderSince, ev.Key)
		return
	}
	m.kvs[ev.Key] = KV{Value: ev.Value, Lease: ev.Lease, CreateRevision: ev.CreateRevision, ModRevision: ev.Revision}
}

func (m *model) under(prefix string) []string {
	var keys []string
	for k := range m.kvs {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func (m *model) slotDir() string     { return m.r.NS + "rebooting/" }
func (m *model) inflightDir() string { return m.r.NS + "rollout/inflight/" }

// slotView is a slot's value, read as the protocol says.
type slotView struct {
	Node      string `json:"node"`
	Lock      string `json:"lock"`
	Group     string `json:"group"`
	BootID    string `json:"boot_id"`
	MachineID string `json:"machine_id"`
	// MaxHolders and MaxTotal are the numbers it was admitted under (0:
	// none), which cap later admissions while it lives.
	MaxHolders int `json:"max_holders"`
	MaxTotal   int `json:"max_total"`
	// Wave is its node's wave.
	Wave int `json:"wave"`
	// bound: the value names its lock and group (else it counts against
	// every group).
	bound bool
	lease int64
	rev   int64
}

func readSlot(key string, kv KV, ns string) slotView {
	var s slotView
	var raw map[string]json.RawMessage
	if json.Unmarshal(kv.Value, &raw) == nil && json.Unmarshal(kv.Value, &s) == nil {
		_, hasLock := raw["lock"]
		_, hasGroup := raw["group"]
		s.bound = hasLock && hasGroup && s.Lock != ""
	}
	s.Node = strings.TrimPrefix(key, ns+"rebooting/")
	s.lease, s.rev = kv.Lease, kv.CreateRevision
	return s
}

// counts reports whether the slot counts against group.
func (s slotView) counts(group string) bool { return !s.bound || s.Group == group }

func (m *model) slots() []slotView {
	var out []slotView
	for _, k := range m.under(m.slotDir()) {
		out = append(out, readSlot(k, m.kvs[k], m.r.NS))
	}
	return out
}

// inflightView is an in-flight record.
type inflightView struct {
	Node    string `json:"node"`
	Group   string `json:"group"`
	Via     string `json:"via"`
	LeaseID string `json:"lease_id"`
	BootID  string `json:"boot_id"`
	Started bool   `json:"started"`
	created int64
}

func readInflight(key string, value []byte, created int64, ns string) inflightView {
	var in inflightView
	if json.Unmarshal(value, &in) != nil {
		in.LeaseID = "unreadable"
	}
	in.Node, in.created = strings.TrimPrefix(key, ns+"rollout/inflight/"), created
	return in
}

// id is the reboot's name for the failure budget (docs/rollout.md,
// "Resuming"): <node>/<its slot's lease>; a record whose lease cannot be
// read, <node>/r<its create revision>.
func (in inflightView) id() string {
	if _, err := strconv.ParseUint(in.LeaseID, 16, 64); err != nil || in.LeaseID == "" {
		return fmt.Sprintf("%s/r%d", in.Node, in.created)
	}
	return in.Node + "/" + in.LeaseID
}

// failure is one failure counting against the budget: a loss, or a failure
// record that names no loss seen before it.
type failure struct {
	id, node, group, what string
	// at is the revision it happened (was seen) at.
	at int64
}

// failures are the failures in the window (the run is far shorter than
// failure_window_sec): every loss not withdrawn, and every failure record
// that is not the record of one of them (a late completion, a take, writes
// the record of a loss already seen: one failure).
func (m *model) failures() []failure {
	var out []failure
	for _, l := range m.lost {
		if l.withdrawn {
			continue
		}
		what := fmt.Sprintf("%s's slot (lease %s) was lost at revision %d", l.node, l.lease, l.at)
		for _, r := range m.records() {
			if r.Node == l.node && r.BootID != "" && r.BootID == l.boot {
				what += fmt.Sprintf(" (its health record still names that boot, state %s)", r.State)
			}
		}
		out = append(out, failure{id: l.id, node: l.node, group: l.group, at: l.at, what: what})
	}
	fdir := m.r.NS + "rollout/failures/"
	for _, k := range m.under(fdir) {
		id := strings.TrimPrefix(k, fdir)
		kv := m.kvs[k]
		known := false
		for _, l := range m.lost {
			known = known || (l.id == id && l.at <= kv.CreateRevision)
		}
		if known {
			continue
		}
		var v struct {
			Group string `json:"group"`
			Kind  string `json:"kind"`
		}
		_ = json.Unmarshal(kv.Value, &v)
		node, _, _ := strings.Cut(id, "/")
		out = append(out, failure{id: id, node: node, group: v.Group, at: kv.CreateRevision,
			what: fmt.Sprintf("failure record %s (%s) of revision %d", id, v.Kind, kv.CreateRevision)})
	}
	return out
}

// orphans notes, after revision rev, each in-flight record without its
// slot not seen so before: a loss.
func (m *model) orphans(rev int64) {
	slots := map[string]int64{}
	for _, s := range m.slots() {
		slots[s.Node] = s.lease
	}
	for _, k := range m.under(m.inflightDir()) {
		kv := m.kvs[k]
		in := readInflight(k, kv.Value, kv.CreateRevision, m.r.NS)
		if lease, ok := slots[in.Node]; ok && fmt.Sprintf("%x", lease) == in.LeaseID {
			continue
		}
		seen := false
		for _, l := range m.lost {
			seen = seen || (l.id == in.id() && l.lease == in.LeaseID)
		}
		if !seen {
			m.lost = append(m.lost, &loss{id: in.id(), node: in.Node, group: in.Group, lease: in.LeaseID, via: in.Via, boot: in.BootID, at: rev, started: in.Started})
		}
	}
}

// withdraw marks the loss of an in-flight record deleted by its own node
// (not with its slot, not turned into a failure record) as no loss, when
// its reboot had not started or a FleetLock client asked again: the node
// was up.
func (m *model) withdraw(ev Event, rev int64) {
	if ev.Prev == nil {
		return
	}
	in := readInflight(ev.Key, ev.Prev.Value, ev.Prev.CreateRevision, m.r.NS)
	if _, recorded := m.kvs[m.r.NS+"rollout/failures/"+in.id()]; recorded {
		return
	}
	for _, l := range m.lost {
		if l.id == in.id() && l.lease == in.LeaseID && !l.withdrawn && (!l.started || l.via == "fleetlock") {
			l.withdrawn = true
			m.notes = append(m.notes, fmt.Sprintf("revision %d: %s gave back the in-flight record of a reboot whose slot had ended (started %v, via %s): not counted as lost", rev, l.node, l.started, l.via))
		}
	}
}

// ackView is a resume's acknowledgement.
type ackView struct {
	Revision     int64    `json:"revision"`
	Acknowledged []string `json:"acknowledged"`
	V            int      `json:"v"`
	// Scope is "group:<group>" for a resume of one group.
	Scope string `json:"scope"`
	// written is the revision the resume wrote it at.
	written int64
}

// noteAck records a resume's acknowledgement, written at rev.
func (m *model) noteAck(value []byte, rev int64) {
	var a ackView
	if json.Unmarshal(value, &a) == nil {
		a.written = rev
		m.acks = append(m.acks, a)
	}
}

// acked reports whether a resume acknowledged f: one written after f
// happened that names it. Each resume names every failure it finds, those
// acknowledged before included, so an acknowledgement lasts; a failure
// that happens after a resume is not covered by it, whatever its name.
func (m *model) acked(f failure) bool {
	for i := range m.acks {
		if m.acks[i].acks(f) {
			return true
		}
	}
	return false
}

// namedBefore is the last resume that named id before f happened (nil:
// none): a later failure under an acknowledged name.
func (m *model) namedBefore(f failure) *ackView {
	var out *ackView
	for i := range m.acks {
		if a := &m.acks[i]; a.written < f.at && a.names(f.id) {
			out = a
		}
	}
	return out
}

// names reports whether a names the failure id.
func (a *ackView) names(id string) bool {
	if a == nil || a.V < 3 {
		return false
	}
	for _, x := range a.Acknowledged {
		if x == id {
			return true
		}
	}
	return false
}

// acks reports whether a covers f: f happened before the resume wrote it,
// and it names f (an older version's acknowledgement names none: it covers
// what happened before it). A loss after the acknowledgement counts again,
// whatever its name.
func (a *ackView) acks(f failure) bool {
	if a == nil || f.at > a.written {
		return false
	}
	return a.V < 3 || a.names(f.id)
}

// spent is the failure budget of group's scope: the distinct nodes with a
// failure no resume acknowledged, and whether they reach max_failures.
func (m *model) spent(group string) ([]failure, bool) {
	nodes := map[string]bool{}
	var counted []failure
	for _, f := range m.failures() {
		if m.acked(f) || (m.r.GroupScope && f.group != group) || nodes[f.node] {
			continue
		}
		nodes[f.node] = true
		counted = append(counted, f)
	}
	return counted, m.r.MaxFailures > 0 && len(counted) >= m.r.MaxFailures
}

// halt is a halt key that covers group ("" when none does).
func (m *model) halt(group string) string {
	keys := m.under(m.r.NS + "rollout/halts/")
	if _, ok := m.kvs[m.r.NS+"rollout/halted"]; ok {
		keys = append(keys, m.r.NS+"rollout/halted")
	}
	for _, k := range keys {
		var h struct {
			Scope string `json:"scope"`
			Group string `json:"group"`
		}
		if json.Unmarshal(m.kvs[k].Value, &h) != nil || h.Scope != "group" || h.Group == group {
			return strings.TrimPrefix(k, m.r.NS)
		}
	}
	return ""
}

func (m *model) paused() bool { _, ok := m.kvs[m.r.NS+"disable"]; return ok }

func (m *model) held(node string) bool { _, ok := m.kvs[m.r.NS+"holds/"+node]; return ok }

// starts is the number of start records that live.
func (m *model) starts() int { return len(m.under(m.r.NS + "rollout/starts/")) }

// pacedBy is the node whose pacing mark of group lives ("" for none). A
// mark that cannot be read paces the ungrouped fleet.
func (m *model) pacedBy(group string) string {
	dir := m.r.NS + "rollout/paced/"
	for _, k := range m.under(dir) {
		var v struct {
			Group string `json:"group"`
		}
		_ = json.Unmarshal(m.kvs[k].Value, &v)
		if v.Group == group {
			node, _, _ := strings.Cut(strings.TrimPrefix(k, dir), "/")
			return node
		}
	}
	return ""
}

// seatView is a lock entry (a seat, or a place in line) of one of the
// lock's lines.
type seatView struct {
	key, line string
	Node      string `json:"node"`
	BootID    string `json:"boot_id"`
	MachineID string `json:"machine_id"`
	Purpose   string `json:"purpose"`
	Candidate bool   `json:"candidate"`
	// MaxHolders is the entry's own; holder says it is among its line's
	// holders (its place is within the smallest max_holders up to it).
	MaxHolders int `json:"max_holders"`
	created    int64
	holder     bool
}

// candidate reports whether the seat was taken for an admission: marked so,
// or (an older version's seat, without the mark) with the purpose the
// entry points give such seats.
func (s seatView) candidate() bool {
	return s.Candidate || s.Purpose == "reboot" || s.Purpose == "fleetlock pre-reboot"
}

// lineOf is group's line: the lock key, or lock/<group>.
func (m *model) lineOf(group string) string {
	if group == "" {
		return m.r.Lock
	}
	return m.r.Lock + "/" + group
}

// seats are the entries of every line of the lock, each line in the order
// of its entries' create revisions, with its holders marked (docs/lock.md:
// the first max_holders, the smallest of those up to each).
func (m *model) seats() []seatView {
	var all []seatView
	for _, k := range m.under(m.r.Lock + "/") {
		i := strings.LastIndex(k, "/")
		line := k[:i]
		if line != m.r.Lock && !(strings.HasPrefix(line, m.r.Lock+"/") && !strings.Contains(line[len(m.r.Lock)+1:], "/")) {
			continue
		}
		var s seatView
		if json.Unmarshal(m.kvs[k].Value, &s) != nil || s.MaxHolders < 1 {
			s.MaxHolders = 1
		}
		s.key, s.line, s.created = k, line, m.kvs[k].CreateRevision
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].created < all[j].created })
	running, place := map[string]int{}, map[string]int{}
	for i := range all {
		s := &all[i]
		if r, ok := running[s.line]; !ok || s.MaxHolders < r {
			running[s.line] = s.MaxHolders
		}
		s.holder = place[s.line] < running[s.line]
		place[s.line]++
	}
	return all
}

// markHolders records, after revision rev, when each entry became a holder.
func (m *model) markHolders(rev int64) {
	for _, s := range m.seats() {
		if s.holder && m.holderSince[s.key] == 0 {
			m.holderSince[s.key] = rev
		}
	}
}

// ticketView is a place in the fleet's line or a FleetLock client's in its
// group's (<ns>queue/<node>).
type ticketView struct {
	Node    string `json:"node"`
	Group   string `json:"group"`
	Kind    string `json:"kind"`
	created int64
}

func (m *model) tickets() []ticketView {
	var out []ticketView
	for _, k := range m.under(m.r.NS + "queue/") {
		var t ticketView
		_ = json.Unmarshal(m.kvs[k].Value, &t)
		t.Node, t.created = strings.TrimPrefix(k, m.r.NS+"queue/"), m.kvs[k].CreateRevision
		out = append(out, t)
	}
	return out
}

// recordView is a health record.
type recordView struct {
	Node           string `json:"node"`
	State          string `json:"state"`
	BootID         string `json:"boot_id"`
	MachineID      string `json:"machine_id"`
	RebootRequired bool   `json:"reboot_required"`
	Wave           int    `json:"wave"`
}

// bakingNote ends waveHeld's words for a lower wave's completion mark.
const bakingNote = "completed within wave_bake_sec)"

// waveHeld names what holds a node of wave back at the model's revision
// (docs/rollout.md, "Waves and canaries"): another node of a lower wave
// that still needs its reboot or is in it, by its live health record
// (reboot_required, or rebooting, or post_reboot) unless it is held, or by
// its slot; and a lower wave's completion still baking. No record of a run
// is older than wave_timeout_sec. Wave 0 waits for nothing.
func (m *model) waveHeld(node string, wave int) []string {
	if wave == 0 {
		return nil
	}
	var out []string
	for _, r := range m.records() {
		busy := r.RebootRequired || r.State == "rebooting" || r.State == "post_reboot"
		if r.Node != node && r.Wave < wave && busy && !m.held(r.Node) {
			out = append(out, fmt.Sprintf("%s (wave %d, record %s)", r.Node, r.Wave, r.State))
		}
	}
	for _, s := range m.slots() {
		if s.Node != node && s.Wave < wave {
			out = append(out, fmt.Sprintf("%s (wave %d, slot)", s.Node, s.Wave))
		}
	}
	dir := m.r.NS + "rollout/wavedone/"
	for _, k := range m.under(dir) {
		var v struct {
			Wave int `json:"wave"`
		}
		if json.Unmarshal(m.kvs[k].Value, &v) != nil || v.Wave < wave {
			out = append(out, fmt.Sprintf("%s (wave %d, %s", strings.TrimPrefix(k, dir), v.Wave, bakingNote))
		}
	}
	sort.Strings(out)
	return out
}

func (m *model) records() []recordView {
	var out []recordView
	for _, k := range m.under(m.r.NS + "nodes/") {
		var r recordView
		if json.Unmarshal(m.kvs[k].Value, &r) != nil {
			continue
		}
		r.Node = strings.TrimPrefix(k, m.r.NS+"nodes/")
		out = append(out, r)
	}
	return out
}

// Budgets as percentages (docs/rollout.md, "Budgets as percentages"): of
// the nodes the count knows in the scope, its health records and its slots
// and the node that asks, rounded down and at least 1. A health record may
// end between a count and its take (FaultEndRecord: the take guards the
// slots it counted, not the records), so a take is judged against the
// nodes known at its count (atCount, the state at the revision its taker
// counted at, from the run's takes) as well as those known after it: a
// node that joined in between makes the budget judged at most that much
// more permissive than the one the admission applied, and without a take's
// count (nil) the state after it alone is used.

// atCount is the state a percentage resolves against at one revision: the
// health records and the slots.
type atCount map[string]KV

// snapshot is the model's records and slots now.
func (m *model) snapshot() atCount {
	out := atCount{}
	for _, p := range []string{m.r.NS + "nodes/", m.slotDir()} {
		for _, k := range m.under(p) {
			out[k] = m.kvs[k]
		}
	}
	return out
}

// percent reports whether a budget is a percentage.
func (r Rules) percent() bool { return r.HoldersPct > 0 || r.TotalPct > 0 }

// holders is max_holders for group by the model's state and at (nil: the
// model's alone), with node (the node that asks; "" for none) known in it,
// and how it was resolved.
func (m *model) holders(group, node string, at atCount) (int, string) {
	if m.r.HoldersPct == 0 {
		return m.r.MaxHolders, fmt.Sprint(m.r.MaxHolders)
	}
	known := m.known(func(g string) bool { return g == group }, func(s slotView) bool { return s.counts(group) }, node, at)
	return percentOf(m.r.HoldersPct, known, groupName(group))
}

// total is max_holders_total (0: none) by the model's state and at, with
// node known in the fleet.
func (m *model) total(node string, at atCount) (int, string) {
	if m.r.TotalPct == 0 {
		return m.r.MaxTotal, fmt.Sprint(m.r.MaxTotal)
	}
	known := m.known(func(string) bool { return true }, func(slotView) bool { return true }, node, at)
	return percentOf(m.r.TotalPct, known, "the fleet")
}

// known are the nodes with a record of a group in or a slot in, by the
// model's state or at, and node.
func (m *model) known(in func(group string) bool, slotIn func(slotView) bool, node string, at atCount) map[string]bool {
	known := map[string]bool{}
	if node != "" {
		known[node] = true
	}
	for _, kvs := range []map[string]KV{m.kvs, at} {
		for k, kv := range kvs {
			switch {
			case strings.HasPrefix(k, m.r.NS+"nodes/"):
				var r struct {
					Group string `json:"group"`
				}
				if json.Unmarshal(kv.Value, &r) == nil && in(r.Group) {
					known[strings.TrimPrefix(k, m.r.NS+"nodes/")] = true
				}
			case strings.HasPrefix(k, m.slotDir()):
				if s := readSlot(k, kv, m.r.NS); slotIn(s) {
					known[s.Node] = true
				}
			}
		}
	}
	return known
}

func percentOf(pct int, known map[string]bool, scope string) (int, string) {
	n := max(1, len(known)*pct/100)
	return n, fmt.Sprintf("%d%% (%d of the %d nodes known in %s)", pct, n, len(known), scope)
}

// capped is a budget capped by the numbers the count reads beside it
// (docs/cluster-protocol.md, "Slots": max_holders is the smallest among
// this node's, the line's seats' and the counted slots'): of the seats of
// line, those the count reads (the first as many as the first entry's
// max_holders, and no more than a count max_holders), and of the slots, those
// counted by counts (max_holders) or every slot (max_holders_total, total).
func (m *model) capped(limit int, what, line string, counts func(slotView) bool, total bool) (int, string) {
	by := ""
	lower := func(n int, who string) {
		if n > 0 && n < limit {
			limit, by = n, who
		}
	}
	if !total {
		var mine []seatView
		for _, s := range m.seats() {
			if s.line == line {
				mine = append(mine, s)
			}
		}
		if len(mine) > 0 {
			read := min(len(mine), mine[0].MaxHolders)
			if m.r.HoldersPct == 0 {
				read = min(read, max(1, m.r.MaxHolders))
			}
			for _, s := range mine[:read] {
				lower(s.MaxHolders, fmt.Sprintf("%s's seat %s", s.Node, strings.TrimPrefix(s.key, m.r.NS)))
			}
		}
	}
	for _, s := range m.slots() {
		if !counts(s) {
			continue
		}
		n := s.MaxHolders
		if total {
			n = s.MaxTotal
		}
		lower(n, s.Node+"'s slot")
	}
	if by != "" {
		what += fmt.Sprintf(", capped at %d by %s", limit, by)
	}
	return limit, what
}
