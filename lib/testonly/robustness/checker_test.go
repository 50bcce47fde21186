package robustness

import (
	"fmt"
	"strings"
	"testing"
)

// The checker on histories written by hand: each invariant is broken once
// and kept once, so that a checker that cannot fail fails here.

// hist writes a history, one transaction (revision) at a time.
type hist struct {
	rev    int64
	events []Event
	kvs    map[string]KV
}

const hns = "/h/"

func newHist() *hist { return &hist{rev: 1, kvs: map[string]KV{}} }

// txn runs ops at the next revision.
func (h *hist) txn(ops ...func()) *hist {
	h.rev++
	for _, op := range ops {
		op()
	}
	return h
}

func (h *hist) put(name, value string, lease int64) func() {
	key := hns + name
	return func() {
		ev := Event{Revision: h.rev, Key: key, Value: []byte(value), Lease: lease, CreateRevision: h.rev}
		if p, ok := h.kvs[key]; ok {
			prev := p
			ev.Prev, ev.CreateRevision = &prev, p.CreateRevision
		}
		h.kvs[key] = KV{Value: ev.Value, Lease: lease, CreateRevision: ev.CreateRevision, ModRevision: h.rev}
		h.events = append(h.events, ev)
	}
}

func (h *hist) del(name string) func() {
	key := hns + name
	return func() {
		p, ok := h.kvs[key]
		if !ok {
			return
		}
		delete(h.kvs, key)
		h.events = append(h.events, Event{Revision: h.rev, Key: key, Delete: true, Prev: &p})
	}
}

// take is a node's take: its slot on lease, and its in-flight record.
func (h *hist) take(node, group string, lease int64) *hist {
	return h.txn(h.put("rebooting/"+node, fmt.Sprintf(`{"node":%q,"lock":"/h/lock","group":%q,"boot_id":"b-%s","machine_id":"m-%s"}`, node, group, node, node), lease),
		h.put("rollout/inflight/"+node, fmt.Sprintf(`{"node":%q,"group":%q,"lease_id":"%x","started":true,"via":"daemon"}`, node, group, lease), lease+1000))
}

func rules(maxHolders, maxFailures int) Rules {
	return Rules{NS: hns, Lock: hns + "lock", MaxHolders: maxHolders, MaxFailures: maxFailures}
}

// want asserts the violations of the history: one of each invariant named
// (in order), none else.
func want(t *testing.T, r Rules, h *hist, attempts []Attempt, invariants ...string) []Violation {
	t.Helper()
	got, _ := Check(r, h.events, attempts, nil)
	var names []string
	for _, v := range got {
		names = append(names, v.Invariant)
	}
	if strings.Join(names, ",") != strings.Join(invariants, ",") {
		var all []string
		for _, v := range got {
			all = append(all, v.String())
		}
		t.Fatalf("violations %v, want %v:\n%s", names, invariants, strings.Join(all, "\n"))
	}
	return got
}

func TestCheckerMaxHolders(t *testing.T) {
	h := newHist().take("a", "", 0xa1).take("b", "", 0xb1)
	want(t, rules(2, 0), h, nil)
	want(t, rules(2, 0), h.take("c", "", 0xc1), nil, InvMaxHolders)
	// Another group's slot does not count; the fleet's budget does.
	g := newHist().take("a", "", 0xa1).take("b", "g2", 0xb1)
	want(t, rules(1, 0), g, nil)
	r := rules(1, 0)
	r.MaxTotal = 1
	want(t, r, g, nil, InvMaxTotal)
}

func TestCheckerLosses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		end   func(h *hist) *hist
		wants []string
	}{
		{"completed: slot and record deleted together", func(h *hist) *hist {
			return h.txn(h.del("rebooting/a"), h.del("rollout/inflight/a"))
		}, nil},
		{"aborted: record deleted first", func(h *hist) *hist {
			return h.txn(h.del("rollout/inflight/a")).txn(h.del("rebooting/a"))
		}, nil},
		{"lost: the slot ran out", func(h *hist) *hist {
			return h.txn(h.del("rebooting/a"))
		}, []string{InvBudget}},
		{"lost, then its started record deleted: still lost", func(h *hist) *hist {
			return h.txn(h.del("rebooting/a")).txn(h.del("rollout/inflight/a"))
		}, []string{InvBudget}},
		{"lost, then late: its record became a failure record", func(h *hist) *hist {
			h.txn(h.del("rebooting/a"))
			id := "a/a1" // its slot's lease
			return h.txn(h.put("rollout/failures/"+id, `{"group":"","kind":"slot_expired"}`, 7), h.del("rollout/inflight/a"))
		}, []string{InvBudget}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.end(newHist().take("a", "", 0xa1)).take("b", "", 0xb1)
			want(t, rules(3, 1), h, nil, tc.wants...)
		})
	}
	// Withdrawn: the record of a reboot that had not started, given back by
	// its node after its slot ran out (a frozen node, not a lost one).
	h := newHist()
	h.txn(h.put("rebooting/a", `{"node":"a","lock":"/h/lock","group":""}`, 0xa1),
		h.put("rollout/inflight/a", `{"node":"a","group":"","lease_id":"a1","started":false}`, 0xa2))
	h.txn(h.del("rebooting/a")).txn(h.del("rollout/inflight/a"))
	want(t, rules(3, 1), h.take("b", "", 0xb1), nil)
	if notes := Notes(rules(3, 1), h.events); len(notes) != 1 {
		t.Fatalf("notes %v, want the withdrawal", notes)
	}
}

func TestCheckerAcknowledgements(t *testing.T) {
	h := newHist().take("a", "", 0xa1)
	id := "a/a1" // a's loss is named by its slot's lease
	h.txn(h.del("rebooting/a"))
	ack := fmt.Sprintf(`{"acknowledged":[%q],"v":3}`, id)
	h.txn(h.put("rollout/ack", ack, 0))
	// The loss named by the resume after it: b may go.
	h.take("b", "", 0xb1)
	want(t, rules(3, 1), h, nil)
	// A later resume that no longer finds a's failure (its record gone)
	// does not un-acknowledge it.
	h.txn(h.del("rollout/inflight/a")).txn(h.put("rollout/ack", `{"acknowledged":[],"v":3}`, 0)).take("c", "", 0xc1)
	want(t, rules(3, 1), h, nil)
	// b lost after the resume: a failure the resume cannot have named.
	lost := newHist().take("a", "", 0xa1)
	lost.txn(lost.del("rebooting/a")).txn(lost.put("rollout/ack", `{"acknowledged":["a/a1"],"v":3}`, 0))
	lost.take("b", "", 0xb1).txn(lost.del("rebooting/b")).take("c", "", 0xc1)
	want(t, rules(3, 1), lost, nil, InvBudget)
	// a taken again over its own record (which keeps its create revision),
	// and lost again: a new name (its new slot's lease), after the resume:
	// counts again.
	again := newHist().take("a", "", 0xa1)
	again.txn(again.del("rebooting/a")).txn(again.put("rollout/ack", `{"acknowledged":["a/a1"],"v":3}`, 0))
	again.take("a", "", 0xa3).txn(again.del("rebooting/a")).take("b", "", 0xb1)
	want(t, rules(3, 1), again, nil, InvBudget)
}

func TestCheckerPauseHoldHalt(t *testing.T) {
	for _, tc := range []struct{ key, value, inv string }{
		{"disable", `{"reason":"x"}`, InvPause},
		{"holds/b", `{"reason":"x"}`, InvHold},
		{"rollout/halts/a/fleet", `{"reason":"x","scope":"fleet"}`, InvBudget},
		{"rollout/halts/a/group:g2", `{"reason":"x","scope":"group","group":"g2"}`, ""},
	} {
		h := newHist()
		h.txn(h.put(tc.key, tc.value, 0)).take("b", "", 0xb1)
		var wants []string
		if tc.inv != "" {
			wants = append(wants, tc.inv)
		}
		want(t, rules(3, 1), h, nil, wants...)
	}
}

func seat(node string, candidate bool, lease int64) (string, string) {
	purpose := "hold"
	if candidate {
		purpose = "reboot"
	}
	return fmt.Sprintf("lock/%x", lease), fmt.Sprintf(`{"node":%q,"boot_id":"b-%s","machine_id":"m-%s","purpose":%q,"candidate":%v,"max_holders":2}`, node, node, node, purpose, candidate)
}

func TestCheckerPlainSeats(t *testing.T) {
	// A plain seat holding the lock since before a's take, so before b's
	// count: a, p and b make 3 of 2.
	h := newHist()
	k, v := seat("p", false, 0x1111111111111)
	h.txn(h.put(k, v, 0x1111111111111)).take("a", "", 0xa1)
	kb, vb := seat("b", true, 0x2222222222222)
	h.txn(h.put(kb, vb, 0x2222222222222)).take("b", "", 0xb1)
	want(t, rules(2, 0), h, nil, InvBusy)
	// A plain seat that holds the lock only since after the last slot
	// change may have come after b's count: no verdict.
	g := newHist().take("a", "", 0xa1)
	g.txn(g.put(kb, vb, 0x2222222222222)).txn(g.put(k, v, 0x1111111111111)).take("b", "", 0xb1)
	want(t, rules(3, 0), g, nil)
}

func TestCheckerOneMachinePerName(t *testing.T) {
	h := newHist().take("a", "", 0xa1)
	h.txn(h.put("rebooting/a", `{"node":"a","lock":"/h/lock","group":"","boot_id":"b-other","machine_id":"m-other"}`, 0xa9))
	want(t, rules(3, 0), h, nil, InvOneMachine)
}

func TestCheckerLiveness(t *testing.T) {
	// a reboots; b and c hold candidate seats (b older), max_holders 2.
	h := newHist().take("a", "", 0xa1)
	kb, vb := seat("b", true, 0x2222222222222)
	kc, vc := seat("c", true, 0x3333333333333)
	h.txn(h.put(kb, vb, 0x2222222222222)).txn(h.put(kc, vc, 0x3333333333333))
	at := func(node, key string) Attempt {
		return Attempt{Actor: node + "/daemon", Node: node, Machine: "m-" + node, Boot: "b-" + node, Seat: hns + key,
			SeatRevision: h.kvs[hns+key].CreateRevision, Revision: h.rev, Rule: "max_holders", Wait: true}
	}
	// The younger waits for the older: right.
	want(t, rules(2, 0), h, []Attempt{at("c", kc)})
	// The older waits too: both wait for a reboot in flight (issue 38, 5).
	want(t, rules(2, 0), h, []Attempt{at("b", kb)}, InvLiveness)
	// Paused: nobody is held back for nothing.
	p := newHist().take("a", "", 0xa1)
	p.txn(p.put(kb, vb, 0x2222222222222)).txn(p.put("disable", `{"reason":"x"}`, 0))
	a := Attempt{Actor: "b/daemon", Node: "b", Machine: "m-b", Boot: "b-b", Seat: hns + kb, SeatRevision: p.kvs[hns+kb].CreateRevision, Revision: p.rev, Rule: "paused"}
	want(t, rules(2, 0), p, []Attempt{a})
}

func TestCheckerPolicies(t *testing.T) {
	record := func(h *hist, node, state string) func() {
		return h.put("nodes/"+node, fmt.Sprintf(`{"node":%q,"state":%q,"boot_id":"b-%s","machine_id":"m-%s"}`, node, state, node, node), 0x77)
	}
	fleet := func() *hist {
		h := newHist()
		return h.txn(record(h, "a", "idle"), record(h, "b", "idle"), record(h, "c", "idle"))
	}
	withPolicy := func(p PolicyRules) Rules {
		r := rules(3, 0)
		r.Policy = p
		return r
	}
	// Three members: a down leaves two (b, c); b down too leaves one.
	h := fleet().take("a", "", 0xa1)
	want(t, withPolicy(PolicyRules{MinHealthy: 2}), h, nil)
	want(t, withPolicy(PolicyRules{MinHealthy: 2}), h.take("b", "", 0xb1), nil, InvPolicy)
	// A record that says rebooting is down whatever its slot; a member by
	// its slot alone counts in the fraction's base and is down.
	r := fleet()
	r.txn(record(r, "c", "rebooting")).take("a", "", 0xa1)
	want(t, withPolicy(PolicyRules{MinHealthy: 2}), r, nil, InvPolicy)
	f := fleet().take("x", "", 0x91).take("a", "", 0xa1) // 4 members, b and c stay: 2 of 4
	want(t, withPolicy(PolicyRules{MinFraction: 0.5}), f, nil)
	want(t, withPolicy(PolicyRules{MinFraction: 0.67}), f, nil, InvPolicy)
	// The last healthy fallback node may not go; with the other up it may.
	fb := withPolicy(PolicyRules{Fallbacks: []string{"a", "b"}})
	want(t, fb, fleet().take("a", "", 0xa1), nil)
	want(t, fb, fleet().take("b", "", 0xb1).take("a", "", 0xa1), nil, InvPolicy)
	// A record that still says rebooting after its node completed is
	// stale: the node is up (a take is judged on that), though an
	// admission that reads the record counts it down (no liveness defect).
	st := fleet().take("a", "", 0xa1)
	st.txn(record(st, "a", "rebooting"))
	st.txn(st.del("rebooting/a"), st.del("rollout/inflight/a"), st.put("rollout/done/a", `{"node":"a"}`, 0x78))
	want(t, withPolicy(PolicyRules{MinHealthy: 2}), st.take("b", "", 0xb1), nil)
	lost := fleet()
	lost.txn(lost.put("rollout/done/a", `{"node":"a"}`, 0x78)).txn(record(lost, "a", "rebooting"))
	want(t, withPolicy(PolicyRules{MinHealthy: 2}), lost.take("b", "", 0xb1), nil, InvPolicy)
	kb, vb := seat("b", true, 0x4444444444444)
	sl := fleet().take("a", "", 0xa1)
	sl.txn(record(sl, "a", "rebooting"))
	sl.txn(sl.del("rebooting/a"), sl.del("rollout/inflight/a"), sl.put("rollout/done/a", `{"node":"a"}`, 0x78)).txn(sl.put(kb, vb, 0x4444444444444))
	refused := Attempt{Actor: "b/daemon", Node: "b", Machine: "m-b", Boot: "b-b", Seat: hns + kb, SeatRevision: sl.kvs[hns+kb].CreateRevision,
		Revision: sl.rev, Rule: "min_healthy_absolute", Wait: true}
	want(t, withPolicy(PolicyRules{MinHealthy: 2}), sl, []Attempt{refused})
	// Liveness: a refusal the policies explain is no liveness defect; one
	// they do not explain is.
	l := fleet().take("b", "", 0xb1)
	ka, va := seat("a", true, 0x2222222222222)
	l.txn(l.put(ka, va, 0x2222222222222))
	at := Attempt{Actor: "a/daemon", Node: "a", Machine: "m-a", Boot: "b-a", Seat: hns + ka, SeatRevision: l.kvs[hns+ka].CreateRevision,
		Revision: l.rev, Rule: "min_healthy_absolute", Wait: true}
	want(t, withPolicy(PolicyRules{MinHealthy: 2}), l, []Attempt{at})
	want(t, withPolicy(PolicyRules{MinHealthy: 1}), l, []Attempt{at}, InvLiveness)
}

// A resume of one group acknowledges that group's failures and those an
// earlier resume acknowledged, never another group's new one.
func TestCheckerGroupResume(t *testing.T) {
	lost := func() *hist {
		h := newHist().take("a", "g1", 0xa1)
		h.txn(h.del("rebooting/a")).take("b", "g2", 0xb1)
		return h.txn(h.del("rebooting/b"))
	}
	r := rules(3, 5)
	r.GroupScope = true
	h := lost()
	h.txn(h.put("rollout/ack", `{"acknowledged":["b/b1"],"scope":"group:g2","v":3}`, 0))
	want(t, r, h, nil)
	h = lost()
	h.txn(h.put("rollout/ack", `{"acknowledged":["a/a1","b/b1"],"scope":"group:g2","v":3}`, 0))
	want(t, r, h, nil, InvAckScope)
	// a's acknowledged by a resume of every scope first: kept, not new.
	h = lost()
	h.txn(h.put("rollout/ack", `{"acknowledged":["a/a1","b/b1"],"v":3}`, 0))
	h.txn(h.put("rollout/ack", `{"acknowledged":["a/a1","b/b1"],"scope":"group:g2","v":3}`, 0))
	want(t, r, h, nil)
}

// With min_interval_sec no slot is taken in a group while a pacing mark of
// that group lives; another group's, or one that ran out, paces nothing.
func TestCheckerPacing(t *testing.T) {
	r := rules(3, 0)
	r.Paced = true
	paced := func() *hist {
		h := newHist()
		return h.txn(h.put("rebooting/a", `{"node":"a","lock":"/h/lock","group":"g1","boot_id":"b-a","machine_id":"m-a"}`, 0xa1),
			h.put("rollout/paced/a", `{"node":"a","group":"g1"}`, 0xa2))
	}
	want(t, r, paced().take("b", "g1", 0xb1), nil, InvPacing)
	want(t, r, paced().take("b", "g2", 0xb1), nil)
	h := paced()
	h.txn(h.del("rollout/paced/a")).take("b", "g1", 0xb1)
	want(t, r, h, nil)
	// Without min_interval_sec a mark is not judged.
	want(t, rules(3, 0), paced().take("b", "g1", 0xb1), nil)
}

// With max_starts_per_hour no slot is taken while as many start records
// live as it allows; fewer, or one that ran out, let it be.
func TestCheckerRate(t *testing.T) {
	r := rules(3, 0)
	r.Rate = 1
	started := func() *hist {
		h := newHist()
		return h.txn(h.put("rebooting/a", `{"node":"a","lock":"/h/lock","group":"","boot_id":"b-a","machine_id":"m-a"}`, 0xa1),
			h.put("rollout/starts/a/a3", `{"node":"a"}`, 0xa3))
	}
	want(t, r, started().take("b", "g2", 0xb1), nil, InvRate)
	h := started()
	h.txn(h.del("rollout/starts/a/a3")).take("b", "", 0xb1)
	want(t, r, h, nil)
	r.Rate = 2
	want(t, r, started().take("b", "", 0xb1), nil)
}

func TestCheckerPercent(t *testing.T) {
	// max_holders 50%: of the nodes known in the group (records and
	// slots); another group's records do not count in it.
	r := rules(0, 0)
	r.HoldersPct = 50
	known := func(groups ...string) *hist {
		h := newHist()
		for i, g := range groups {
			h.txn(h.put(fmt.Sprintf("nodes/r%d", i), fmt.Sprintf(`{"state":"idle","group":%q}`, g), 0x100))
		}
		return h
	}
	// 4 known in the ungrouped fleet (2 records and the slots of a and
	// b): 2 slots.
	want(t, r, known("", "").take("a", "", 0xa1).take("b", "", 0xb1), nil)
	// 3 known (1 record of the group and the two slots; the other group's
	// records do not count): 1 slot.
	want(t, r, known("", "g2", "g2").take("a", "", 0xa1).take("b", "", 0xb1), nil, InvMaxHolders)
	// At least 1, whatever the fleet's size.
	want(t, r, newHist().take("a", "", 0xa1), nil)
	// max_holders_total 50%: of every node known in the fleet.
	r = rules(5, 0)
	r.TotalPct = 50
	want(t, r, known("g2").take("a", "", 0xa1).take("b", "g2", 0xb1), nil, InvMaxTotal)
	want(t, r, known("g2", "").take("a", "", 0xa1).take("b", "g2", 0xb1), nil)
}

// A percentage at a take is of the nodes known at its count or after it:
// a record that ends between the two shrinks the budget after the take,
// and the take kept the one its count resolved; a record's end between
// takes gives back no slot. Without the take's count the state after it
// alone decides.
func TestCheckerPercentRecordEnds(t *testing.T) {
	r := rules(0, 0)
	r.HoldersPct = 50
	// b counts 4 known (2 records, a's slot and b): 2 slots. r2's record
	// ends; b takes: 3 known after it, 1 slot.
	fleet := func() (*hist, int64) {
		h := newHist()
		h.txn(h.put("nodes/r0", `{"state":"idle"}`, 0x100), h.put("nodes/r2", `{"state":"idle"}`, 0x102))
		h.take("a", "", 0xa1)
		counted := h.rev
		h.txn(h.del("nodes/r2"))
		return h.take("b", "", 0xb1), counted
	}
	h, counted := fleet()
	takes := []Take{{Actor: "b/daemon", Node: "b", Count: counted, Revision: h.rev}}
	if got, _ := Check(r, h.events, nil, takes); len(got) != 0 {
		t.Fatalf("a take within the budget its count resolved broke %v", got)
	}
	// Without the take's count: judged after it, 2 slots at 1.
	if got, _ := Check(r, h.events, nil, nil); len(got) != 1 || got[0].Invariant != InvMaxHolders {
		t.Fatalf("judged after the take alone: %v, want max_holders broken", got)
	}
	// Over the budget its count resolved: 2 known at the count (r0 and
	// a's slot) allow 1.
	o := newHist()
	o.txn(o.put("nodes/r0", `{"state":"idle"}`, 0x100))
	o.take("a", "", 0xa1)
	counted = o.rev
	o.take("b", "", 0xb1)
	takes = []Take{{Actor: "b/daemon", Node: "b", Count: counted, Revision: o.rev}}
	want2 := func(got []Violation) {
		t.Helper()
		if len(got) == 0 || got[0].Invariant != InvMaxHolders {
			t.Fatalf("2 slots of 3 known at 50%%: %v, want max_holders broken", got)
		}
	}
	got, _ := Check(r, o.events, nil, takes)
	want2(got)
	// A record's end after both takes: no take, nothing judged.
	e, counted := fleet()
	takes = []Take{{Actor: "b/daemon", Node: "b", Count: counted, Revision: e.rev}}
	e.txn(e.del("nodes/r0"))
	if got, _ := Check(r, e.events, nil, takes); len(got) != 0 {
		t.Fatalf("a record's end after the takes broke %v", got)
	}
}

func TestCheckerPercentLiveness(t *testing.T) {
	// max_holders 50% of 5 known (3 records, a's slot, b) is 2: with a
	// in its reboot, b's seat has room, unless a's slot carries a smaller
	// number (admitted when fewer nodes were known), which caps it.
	r := rules(0, 0)
	r.HoldersPct = 50
	kb, vb := seat("b", true, 0x2222222222222)
	fleet := func(slot string) (*hist, Attempt) {
		h := newHist()
		h.txn(h.put("nodes/r0", `{"state":"idle"}`, 0x100), h.put("nodes/r1", `{"state":"idle"}`, 0x100), h.put("nodes/r2", `{"state":"idle"}`, 0x100))
		h.txn(h.put("rebooting/a", slot, 0xa1), h.put("rollout/inflight/a", `{"node":"a","group":"","lease_id":"a1","started":true,"via":"daemon"}`, 0xa2))
		h.txn(h.put(kb, vb, 0x2222222222222))
		return h, Attempt{Actor: "b/daemon", Node: "b", Machine: "m-b", Boot: "b-b", Seat: hns + kb,
			SeatRevision: h.kvs[hns+kb].CreateRevision, Revision: h.rev, Rule: "max_holders", Wait: true}
	}
	h, at := fleet(`{"node":"a","lock":"/h/lock","group":"","boot_id":"b-a","machine_id":"m-a"}`)
	want(t, r, h, []Attempt{at}, InvLiveness)
	h, at = fleet(`{"node":"a","lock":"/h/lock","group":"","boot_id":"b-a","machine_id":"m-a","max_holders":1}`)
	want(t, r, h, []Attempt{at})
}

// A node of wave 1 is admitted only on a count that saw no lower wave
// busy: a record of wave 0 that needs its reboot, is rebooting or is
// post_reboot, unless held; a slot of wave 0. One of its own wave, or a
// lower one that is done, holds nothing back; and a refusal by the waves
// with nothing of a lower wave busy is a liveness violation.
func TestCheckerWaves(t *testing.T) {
	kb, vb := seat("b", true, 0x2222222222222)
	record := func(h *hist, node, state string, required bool, wave int) func() {
		return h.put("nodes/"+node, fmt.Sprintf(`{"node":%q,"state":%q,"reboot_required":%v,"wave":%d}`, node, state, required, wave), 7)
	}
	attempt := func(h *hist, admitted bool) Attempt {
		at := Attempt{Actor: "b/daemon", Node: "b", Wave: 1, Machine: "m-b", Boot: "b-b", Seat: hns + kb,
			SeatRevision: h.kvs[hns+kb].CreateRevision, Revision: h.rev, Admitted: admitted}
		if !admitted {
			at.Rule, at.Wait = "wave", true
		}
		return at
	}
	for _, tc := range []struct {
		name string
		busy func(h *hist) func()
		// held: the lower wave holds b back.
		held bool
	}{
		{"a wave-0 record that needs its reboot", func(h *hist) func() { return record(h, "a", "waiting", true, 0) }, true},
		{"a wave-0 record rebooting", func(h *hist) func() { return record(h, "a", "rebooting", false, 0) }, true},
		{"a wave-0 record post_reboot", func(h *hist) func() { return record(h, "a", "post_reboot", false, 0) }, true},
		{"a wave-0 record idle", func(h *hist) func() { return record(h, "a", "idle", false, 0) }, false},
		{"a wave-1 record that needs its reboot", func(h *hist) func() { return record(h, "a", "waiting", true, 1) }, false},
		{"b's own record", func(h *hist) func() { return record(h, "b", "waiting", true, 0) }, false},
		{"a held wave-0 node", func(h *hist) func() {
			r := record(h, "a", "waiting", true, 0)
			return func() { r(); h.put("holds/a", `{"reason":"x"}`, 0)() }
		}, false},
		{"a wave-0 slot", func(h *hist) func() {
			return h.put("rebooting/a", `{"node":"a","lock":"/h/lock","group":"","boot_id":"b-a","machine_id":"m-a"}`, 0xa1)
		}, true},
		{"a wave-1 slot", func(h *hist) func() {
			return h.put("rebooting/a", `{"node":"a","lock":"/h/lock","group":"","boot_id":"b-a","machine_id":"m-a","wave":1}`, 0xa1)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHist()
			h.txn(h.put(kb, vb, 0x2222222222222)).txn(tc.busy(h))
			admitted, refused := []string{InvWave}, []string(nil)
			if !tc.held {
				admitted, refused = nil, []string{InvLiveness}
			}
			want(t, rules(3, 0), h, []Attempt{attempt(h, true)}, admitted...)
			want(t, rules(3, 0), h, []Attempt{attempt(h, false)}, refused...)
		})
	}
	// Judged at the count: a lower wave's need published after it is a
	// later need (the take does not guard the records).
	h := newHist()
	h.txn(h.put(kb, vb, 0x2222222222222))
	at := attempt(h, true)
	h.txn(record(h, "a", "waiting", true, 0))
	want(t, rules(3, 0), h, []Attempt{at})
}
