package slot

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// seatOf takes a seat of f's group's line with max_holders n; candidate
// marks it as an admission's (the daemon, the pipeline, FleetLock).
func (r *rig) seatOf(f Fleet, n int, candidate bool) *lock.Held {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := lock.Acquire(ctx, r.c, lock.Options{Key: f.SeatKey(), MaxHolders: n, TTL: 10 * time.Second, Node: f.Node,
		BootID: f.BootID, MachineID: f.MachineID, Candidate: candidate})
	if err != nil {
		r.t.Fatalf("%s: seat: %v", f.Node, err)
	}
	r.t.Cleanup(func() { _ = h.Release(context.Background()) })
	return h
}

// verdictUnder is one admission of f under seat that does not wait.
func (r *rig) verdictUnder(f Fleet, seat *lock.Held) (slotinfo.Verdict, *Reboot) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := Admission{Fleet: f, Seat: seat}
	out, err := a.Admit(ctx)
	var ref *slotinfo.Refusal
	if err != nil && !errors.As(err, &ref) {
		r.t.Fatalf("%s: admission: %v", f.Node, err)
	}
	return out.Verdict, out.Reboot
}

// Two candidates that take the last two seats together while a third
// node's reboot holds a slot (max_holders 2): each used to count the other
// and both waited until that reboot ended (a liveness defect that made
// bats/e2e_failure_budget.bats fail now and then). The older is admitted;
// the younger counts it and waits.
func TestTwoCandidateSeatsDoNotStarve(t *testing.T) {
	r := newRig(t)
	two := func(f *Fleet) { f.Rules.MaxHolders.N = 2 }
	a := r.fleet("a", "", time.Minute, two)
	b := r.fleet("b", "", time.Minute, two)
	c := r.fleet("c", "", time.Minute, two)
	r.mustAdmit(a) // a is rebooting: its slot, no seat
	sb := r.seatOf(b, 2, true)
	sc := r.seatOf(c, 2, true)
	if v, held := r.verdictUnder(c, sc); held != nil || v.Rule != RuleMaxHolders {
		t.Fatalf("c (younger) = %+v held %v, want it to wait for max_holders (a's slot, b's older seat)", v, held != nil)
	}
	v, held := r.verdictUnder(b, sb)
	if held == nil {
		t.Fatalf("b (older) = %s: %s; want it admitted: a's slot and b make 2 of 2, c joined after it", v.Rule, v.Reason)
	}
	if v, held := r.verdictUnder(c, sc); held != nil || v.Rule != RuleMaxHolders {
		t.Fatalf("c after b's take = %+v, want max_holders: a's and b's slots", v)
	}
}

// An unmarked seat (a plain `crd-lock hold`, `etcdctl lock`, an older
// version) counts for every candidate whatever its place in line: counting
// only the older seats would let a daemon in while a younger plain hold
// runs its command beside a reboot in flight (three busy at max_holders 2).
func TestPlainSeatCountsWhateverItsAge(t *testing.T) {
	r := newRig(t)
	two := func(f *Fleet) { f.Rules.MaxHolders.N = 2 }
	a := r.fleet("a", "", time.Minute, two)
	b := r.fleet("b", "", time.Minute, two)
	p := r.fleet("p", "", time.Minute, two)
	r.mustAdmit(a)
	sb := r.seatOf(b, 2, true)
	r.seatOf(p, 2, false) // younger, unmarked
	if v, held := r.verdictUnder(b, sb); held != nil || v.Rule != RuleMaxHolders {
		t.Fatalf("b = %+v held %v, want it to wait: a's slot, b and the plain seat make 3 of 2", v, held != nil)
	}
}
