package slot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// The failure budget's holes found by review against a real etcd (issue 38),
// each closed here; the same through the real binaries is
// testscripts/failure_budget_test.go.

// A resume acknowledges the failures it names, not everything created
// before it: a reboot in flight at the resume that is lost after it halts
// the rollout again (issue 38, 2).
func TestResumeAcknowledgesOnlyWhatItNames(t *testing.T) {
	r := newRig(t)
	two := func(f *Fleet) { f.Rules.MaxHolders.N = 2 }
	z := r.fleet("z", "", 2*time.Second, two)
	a := r.fleet("a", "", 6*time.Second, two)
	r.mustAdmit(z)
	r.mustAdmit(a)
	testsupport.Eventually(t, 10*time.Second, "z's slot to run out", func() bool { return !r.exists(z.Key()) })
	q := r.fleet("q", "", time.Minute, two)
	r.refused(q, RuleHalted)
	if !r.exists(a.Key()) {
		t.Fatal("a's slot ran out before the resume: the test needs it in flight")
	}
	ack := r.resume("z reinstalled")
	if len(ack.Acknowledged) != 1 || ack.Acknowledged[0] == "" {
		t.Fatalf("acknowledged %v, want z's failure alone", ack.Acknowledged)
	}
	testsupport.Eventually(t, 15*time.Second, "a's slot to run out", func() bool { return !r.exists(a.Key()) })
	v := r.refused(q, RuleHalted)
	if len(v.Failures) != 1 || v.Failures[0].Node != "a" {
		t.Fatalf("failures after the resume %+v, want a's loss (z's is acknowledged)", v.Failures)
	}
}

// Renewing a slot renews its in-flight record: the record must outlive the
// slot by the failure window, or a node lost after a late renewal leaves a
// slot that ends with nothing to say it was lost (issue 38, 3).
func TestRenewKeepsTheInflightRecordAhead(t *testing.T) {
	r := newRig(t)
	window := func(f *Fleet) { f.Rules.FailureWindowSec = 60 }
	a := r.fleet("a", "", 5*time.Second, window)
	h := r.mustAdmit(a)
	time.Sleep(2 * time.Second)
	if err := h.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	slotTTL := r.ttl(h.Leases.Slot)
	inTTL := r.ttl(h.Leases.Inflight)
	if inTTL < slotTTL+60-1 {
		t.Fatalf("after a renewal the slot has %d s and its in-flight record %d s: the record must outlive it by the failure window (60 s)", slotTTL, inTTL)
	}
}

func (r *rig) ttl(id clientv3.LeaseID) int64 {
	r.t.Helper()
	resp, err := r.c.TimeToLive(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.TTL
}

// A slot whose lease runs out between the count and the take deletes the
// slot without changing any remaining key's revision: the take must still
// fail, and the count after it finds the loss (issue 38, 4).
func TestSlotEndingBetweenCountAndTake(t *testing.T) {
	r := newRig(t)
	two := func(f *Fleet) { f.Rules.MaxHolders.N = 2 }
	a := r.fleet("a", "", time.Minute, two)
	ha := r.mustAdmit(a)
	b := r.fleet("b", "", time.Minute, two)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	revoked := false
	adm := Admission{Fleet: b, Prepare: func(ctx context.Context, _ Leases) error {
		if !revoked {
			// Between the count that admitted b and b's take.
			revoked = true
			if _, err := r.c.Revoke(ctx, ha.Leases.Slot); err != nil {
				return err
			}
		}
		return nil
	}}
	out, err := adm.Admit(ctx)
	var ref *slotinfo.Refusal
	if !errors.As(err, &ref) || ref.Rule != RuleHalted || out.Reboot != nil {
		t.Fatalf("b after a's slot ended between its count and its take: %v (slot %v), want halted", err, out.Reboot != nil)
	}
}

// haltTwoGroups loses a reboot in rack1 and one in rack2 under
// failure_scope group, and has a2 (rack1) and b2 (rack2) refused by the
// halts; it returns the option of that scope.
func haltTwoGroups(t *testing.T, r *rig) func(*Fleet) {
	t.Helper()
	scoped := func(f *Fleet) { f.Rules.FailureScope = config.ScopeGroup }
	a := r.fleet("a", "rack1", 2*time.Second, scoped)
	b := r.fleet("b", "rack2", 2*time.Second, scoped)
	r.mustAdmit(a)
	r.mustAdmit(b)
	testsupport.Eventually(t, 10*time.Second, "both slots to run out", func() bool { return !r.exists(a.Key()) && !r.exists(b.Key()) })
	r.refused(r.fleet("a2", "rack1", time.Minute, scoped), RuleHalted)
	r.refused(r.fleet("b2", "rack2", time.Minute, scoped), RuleHalted)
	return scoped
}

// With failure_scope group, each group's failures halt that group, with a
// halt of its own; one resume acknowledges both by name.
func TestEachGroupHaltsOnItsOwn(t *testing.T) {
	r := newRig(t)
	scoped := haltTwoGroups(t, r)
	for _, k := range []string{HaltKey(r.ns, "a2", "group:rack1"), HaltKey(r.ns, "b2", "group:rack2")} {
		if !r.exists(k) {
			t.Errorf("no halt %s: a group's failures were refused but not recorded", k)
		}
	}
	r.mustAdmit(r.fleet("c", "rack3", time.Minute, scoped))
	if ack := r.resume("both racks fixed", scoped); len(ack.Acknowledged) != 2 {
		t.Fatalf("acknowledged %v, want both groups' failures", ack.Acknowledged)
	}
	r.mustAdmit(r.fleet("a2", "rack1", time.Minute, scoped))
}

// A resume of one group (failure_scope group) ends that group's halt alone
// and acknowledges that group's failures alone: another group stays halted,
// and a later resume of it keeps the first group's acknowledgement. The
// older versions' one key is kept while any halt is left, copied from one
// that is; a resume of a group that is not halted, or of a group while the
// budget is the fleet's, changes nothing.
func TestResumeOfOneGroup(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	scoped := haltTwoGroups(t, r)
	op := r.fleet("op", "", time.Minute, scoped)
	group := func(g string) *string { return &g }

	for _, tc := range []struct {
		name  string
		f     Fleet
		q     ResumeRequest
		cause string
	}{
		{"no reason", op, ResumeRequest{Group: group("rack1"), By: "op"}, "--reason"},
		{"a group not halted", op, ResumeRequest{Group: group("rack3"), By: "op", Reason: "x"}, "group rack3 is not halted (halted: group rack1, group rack2)"},
		{"the fleet's budget", r.fleet("op", "", time.Minute), ResumeRequest{Group: group("rack1"), By: "op", Reason: "x"}, "failure_scope fleet"},
	} {
		res, err := tc.f.Resume(ctx, tc.q)
		if exitcode.CodeOf(err) != exitcode.Config || !strings.Contains(fmt.Sprint(err), tc.cause) || res.Ack != nil {
			t.Errorf("%s: %v (acknowledgement %v), want exit config naming %q", tc.name, err, res.Ack, tc.cause)
		}
	}
	if r.halts() != 2 {
		t.Fatalf("%d halts after refused resumes, want both groups' 2", r.halts())
	}

	res, err := op.Resume(ctx, ResumeRequest{Group: group("rack1"), By: "op", Reason: "rack1 fixed"})
	if err != nil || res.Ack == nil {
		t.Fatalf("resume --group rack1: %v", err)
	}
	if got := res.Ack.Acknowledged; len(got) != 1 || !strings.HasPrefix(got[0], "a/") || res.Ack.Scope != "group:rack1" {
		t.Fatalf("resume --group rack1 acknowledged %v (scope %q), want a's failure alone", got, res.Ack.Scope)
	}
	if len(res.StillHalted) != 1 || res.StillHalted[0].Group != "rack2" {
		t.Fatalf("still halted after resume --group rack1: %+v, want rack2", res.StillHalted)
	}
	r.refused(r.fleet("b2", "rack2", time.Minute, scoped), RuleHalted)
	legacy, err := r.c.Get(ctx, LegacyHaltKey(r.ns))
	if err != nil || len(legacy.Kvs) != 1 || ParseHalt(legacy.Kvs[0].Key, legacy.Kvs[0].Value).Group != "rack2" {
		t.Fatalf("the older versions' halt key after resume --group rack1: %v %v, want rack2's halt", legacy.Kvs, err)
	}
	r.mustAdmit(r.fleet("a2", "rack1", time.Minute, scoped))

	res, err = op.Resume(ctx, ResumeRequest{Group: group("rack2"), By: "op", Reason: "rack2 fixed"})
	if err != nil || res.Ack == nil || len(res.Ack.Acknowledged) != 2 || len(res.StillHalted) != 0 {
		t.Fatalf("resume --group rack2: %v, acknowledged %v, still halted %d: want both failures acknowledged (rack1's kept) and nothing halted", err, res.Ack, len(res.StillHalted))
	}
	if r.halts() != 0 || r.exists(LegacyHaltKey(r.ns)) {
		t.Fatal("a halt is left after both groups were resumed")
	}
	r.mustAdmit(r.fleet("b2", "rack2", time.Minute, scoped))
	a3 := r.fleet("a3", "rack1", time.Minute, scoped)
	n, err := a3.Count(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if fs := a3.Failures(n, a3.Decide(n).Rules); len(fs) != 0 {
		t.Fatalf("rack1's failures after resume --group rack2: %+v, want none (acknowledged by resume --group rack1)", fs)
	}
}

// A budget spent while reboots are paused records its halt all the same:
// the admission that is refused by the pause writes it.
func TestFailureDuringAPauseHalts(t *testing.T) {
	r := newRig(t)
	a := r.fleet("a", "", 2*time.Second)
	r.mustAdmit(a)
	r.put(PauseKey(r.ns), `{"reason":"freeze","by":"op"}`, 0)
	testsupport.Eventually(t, 10*time.Second, "a's slot to run out", func() bool { return !r.exists(a.Key()) })
	r.refused(r.fleet("b", "", time.Minute), RulePaused)
	if r.halts() != 1 {
		t.Fatal("a failure during the pause wrote no halt: lifting the pause would forget it")
	}
}

// Start marks the reboot started only while nothing stops it: a pause, a
// hold or a halt given while the hooks ran is a refusal, a slot that ran out
// is ErrExpired; otherwise the in-flight record says started.
func TestStartIsGuarded(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a := r.fleet("a", "", time.Minute)
	h := r.mustAdmit(a)
	for _, tc := range []struct{ key, value, rule string }{
		{PauseKey(r.ns), `{"reason":"freeze","by":"op"}`, RulePaused},
		{HoldKey(r.ns, "a"), `{"reason":"disk","by":"op"}`, RuleHeld},
		{HaltKey(r.ns, "x", config.ScopeFleet), `{"reason":"lost x","scope":"fleet"}`, RuleHalted},
	} {
		r.put(tc.key, tc.value, 0)
		var ref *slotinfo.Refusal
		if err := h.Start(ctx); !errors.As(err, &ref) || ref.Rule != tc.rule {
			t.Fatalf("Start with %s set: %v, want refused by %s", tc.key, err, tc.rule)
		}
		if _, err := r.c.Delete(ctx, tc.key); err != nil {
			t.Fatal(err)
		}
	}
	// Another group's halt does not stop it.
	r.put(HaltKey(r.ns, "x", "group:rack9"), `{"reason":"lost y","scope":"group","group":"rack9"}`, 0)
	if err := h.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	resp, err := r.c.Get(ctx, InflightKey(r.ns, "a"))
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatal("no in-flight record", err)
	}
	var in Inflight
	if err := json.Unmarshal(resp.Kvs[0].Value, &in); err != nil || !in.Started || in.StartedAt == nil || resp.Kvs[0].Lease != int64(h.Leases.Inflight) {
		t.Fatalf("in-flight record after Start: %s (lease %x)", resp.Kvs[0].Value, resp.Kvs[0].Lease)
	}
	if err := Free(ctx, r.c, h.Lease); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); !errors.Is(err, ErrExpired) {
		t.Fatalf("Start after the slot ended: %v, want ErrExpired", err)
	}
}

// Two admissions of one machine at once (a FleetLock client asking two
// servers) take one slot: the second finds the first's, takes it again on
// new leases, and writes no second start.
func TestOneMachineTwiceIsOneStart(t *testing.T) {
	r := newRig(t)
	rate := func(f *Fleet) { f.Rules.MaxStartsPerHour = 5; f.Via = ViaFleetLock }
	a := r.fleet("a", "", time.Minute, rate)
	h1 := r.mustAdmit(a)
	h2 := r.mustAdmit(a)
	starts, err := r.c.Get(context.Background(), StartsDir(r.ns), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if starts.Count != 1 {
		t.Fatalf("%d start records for one machine admitted twice, want 1", starts.Count)
	}
	if h1.Lease == h2.Lease || r.ttl(h1.Lease) > 0 {
		t.Fatalf("the second take kept the first's lease %x (ttl %d)", h1.Lease, r.ttl(h1.Lease))
	}
	if got := fmt.Sprint(r.ttl(h2.Lease) > 0); got != "true" {
		t.Fatal("the slot's new lease is not alive")
	}
}
