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
