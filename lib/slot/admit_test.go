package slot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// rig is one test's namespace and the nodes in it.
type rig struct {
	t  *testing.T
	c  *clientv3.Client
	ns string
	// unindexed publishes records without their index keys, as 0.1.0
	// does (the index's group keys: lib/slot Fleet.fleetCounts).
	unindexed bool
}

func newRig(t *testing.T) *rig {
	c := testsupport.NewClient(t, embedded.Endpoint)
	ns := "/t/admit-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "/"
	t.Cleanup(func() { _, _ = c.Delete(context.Background(), ns, clientv3.WithPrefix()) })
	return &rig{t: t, c: c, ns: ns}
}

// fleet is node's Fleet with the default rules (one failure halts), a slot
// TTL of ttl and the changes in opts.
func (r *rig) fleet(node, group string, ttl time.Duration, opts ...func(*Fleet)) Fleet {
	cfg := config.Default()
	cfg.NodeName, cfg.Group = node, group
	f := Fleet{Client: r.c, NS: r.ns, Lock: r.ns + "lock", Group: group, Node: node, BootID: "boot-" + node + "-1", MachineID: "m-" + node,
		Via: ViaDaemon, Rules: policy.RulesOf(cfg), TTL: ttl, RPCTimeout: 3 * time.Second}
	for _, o := range opts {
		o(&f)
	}
	return f
}

// admit runs one admission that does not wait.
func (r *rig) admit(f Fleet) (Outcome, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := Admission{Fleet: f}
	return a.Admit(ctx)
}

func (r *rig) mustAdmit(f Fleet) *Reboot {
	r.t.Helper()
	out, err := r.admit(f)
	if err != nil || out.Reboot == nil {
		r.t.Fatalf("%s: admission refused: %v", f.Node, err)
	}
	return out.Reboot
}

// refused asserts the admission says no by rule.
func (r *rig) refused(f Fleet, rule string) slotinfo.Verdict {
	r.t.Helper()
	out, err := r.admit(f)
	var ref *slotinfo.Refusal
	if !errors.As(err, &ref) || ref.Rule != rule {
		r.t.Fatalf("%s: admission = %v (held %v), want refused by %s", f.Node, err, out.Reboot != nil, rule)
	}
	if out.Reboot != nil {
		r.t.Fatalf("%s: refused but a slot was taken", f.Node)
	}
	if _, err := r.c.Get(context.Background(), Key(r.ns, f.Node)); err != nil {
		r.t.Fatal(err)
	}
	return ref.Verdict
}

func (r *rig) put(key, value string, lease clientv3.LeaseID) {
	r.t.Helper()
	var opts []clientv3.OpOption
	if lease != 0 {
		opts = append(opts, clientv3.WithLease(lease))
	}
	if _, err := r.c.Put(context.Background(), key, value, opts...); err != nil {
		r.t.Fatal(err)
	}
}

// record publishes node's health record as the daemon does.
func (r *rig) record(f Fleet, state string, required bool, mut ...func(*policy.NodeRecord)) {
	r.t.Helper()
	rules := f.Rules
	rec := policy.NodeRecord{Node: f.Node, State: state, RebootRequired: required, Lock: f.Lock, Group: f.Group, BootID: f.BootID,
		MachineID: f.MachineID, Wave: f.Wave, Rules: &rules, V: policy.ProtocolVersion}
	for _, m := range mut {
		m(&rec)
	}
	b, _ := json.Marshal(rec)
	r.put(RecordKey(r.ns, f.Node), string(b), 0)
	if !r.unindexed {
		if _, err := r.c.Txn(context.Background()).Then(append(append(IndexOps(r.ns, f.Node, state, 0), GroupOp(r.ns, f.Group, f.Node, 0)), BusyOps(r.ns, rec, nil, 0)...)...).Commit(); err != nil {
			r.t.Fatal(err)
		}
	}
	// Its rules key, as publish writes it with the record.
	g, err := r.c.Grant(context.Background(), 600)
	if err != nil {
		r.t.Fatal(err)
	}
	ops := RulesOps(r.ns, f.Node, f.Group, *rec.Rules, g.ID)
	if _, err := r.c.Txn(context.Background()).Then(ops...).Commit(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) exists(key string) bool {
	r.t.Helper()
	resp, err := r.c.Get(context.Background(), key)
	if err != nil {
		r.t.Fatal(err)
	}
	return len(resp.Kvs) > 0
}

// The first lost node's slot simply running out halts the fleet: nobody
// has to publish or write anything for the next admission to see it.
func TestLostNodeHaltsTheFleet(t *testing.T) {
	r := newRig(t)
	a := r.fleet("a", "", 2*time.Second)
	r.mustAdmit(a)
	b := r.fleet("b", "", time.Minute)
	r.refused(b, RuleMaxHolders)
	testsupport.Eventually(t, 10*time.Second, "a's slot to run out", func() bool { return !r.exists(a.Key()) })
	v := r.refused(b, RuleHalted)
	if len(v.Failures) != 1 || v.Failures[0].Node != "a" || v.Failures[0].Kind != FailureSlotExpired {
		t.Fatalf("failures %+v, want a's slot_expired", v.Failures)
	}
	if !strings.Contains(v.Reason, "a (slot_expired") {
		t.Errorf("reason %q does not name a and its kind", v.Reason)
	}
	if r.halts() != 1 || !r.exists(HaltKey(r.ns, "b", config.ScopeFleet)) {
		t.Fatalf("the admission that found the budget spent recorded %d halts, want its own (b's) of the fleet", r.halts())
	}
	// Another group halts too: the scope is the fleet.
	r.refused(r.fleet("c", "rack2", time.Minute), RuleHalted)
	// The operator resumes: the halt is gone, a's loss acknowledged by name.
	ack := r.resume("looked")
	if r.halts() != 0 || r.exists(LegacyHaltKey(r.ns)) {
		t.Fatal("resume left a halt")
	}
	if len(ack.Acknowledged) != 1 || !strings.HasPrefix(ack.Acknowledged[0], "a/") {
		t.Fatalf("resume acknowledged %v, want a's failure by name", ack.Acknowledged)
	}
	r.mustAdmit(b)
}

// halts counts the halts recorded (every writer and scope).
func (r *rig) halts() int {
	r.t.Helper()
	resp, err := r.c.Get(context.Background(), HaltsDir(r.ns), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		r.t.Fatal(err)
	}
	return int(resp.Count)
}

// resume is `clusterrebootd resume --reason` by an operator with the rules
// in opts.
func (r *rig) resume(reason string, opts ...func(*Fleet)) Ack {
	r.t.Helper()
	res, err := r.fleet("op", "", time.Minute, opts...).Resume(context.Background(), ResumeRequest{By: "op", Reason: reason})
	if err != nil || res.Ack == nil {
		r.t.Fatalf("resume: %v (acknowledgement %v)", err, res.Ack)
	}
	return *res.Ack
}

// A node whose slot ran out is a failure even while its health record
// still names the boot the slot was taken in: the record lives up to three
// publish intervals after its node went down, so it proves nothing. Before
// protocol 3 it excused the loss, and the next node was admitted while the
// lost one was down (issue 38, 1).
func TestLostNodeWithALiveRecordIsAFailure(t *testing.T) {
	r := newRig(t)
	a := r.fleet("a", "", 2*time.Second)
	r.mustAdmit(a)
	r.record(a, policy.StateRebooting, true)
	testsupport.Eventually(t, 10*time.Second, "a's slot to run out", func() bool { return !r.exists(a.Key()) })
	v := r.refused(r.fleet("b", "", time.Minute), RuleHalted)
	if len(v.Failures) != 1 || v.Failures[0].Node != "a" {
		t.Fatalf("failures %+v, want a's", v.Failures)
	}
}

// Completion deletes the slot and its in-flight record together: no
// failure. A node that comes back after its slot ran out records the
// failure itself, so coming back late does not un-halt the fleet; once an
// operator resumed, the same late return records nothing.
func TestCompletionAndLateReturn(t *testing.T) {
	for _, resumedFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("resumed before the late return: %v", resumedFirst), func(t *testing.T) {
			r := newRig(t)
			ctx := context.Background()
			a := r.fleet("a", "", time.Minute)
			h := r.mustAdmit(a)
			x := Completion{Client: r.c, NS: r.ns, BootID: "boot-a-2", FailureWindowSec: 3600}
			freed, err := x.Complete(ctx, NewClaim(a, h.Leases, time.Now(), 1))
			if err != nil || !freed || r.exists(InflightKey(r.ns, "a")) {
				t.Fatalf("complete: freed %v err %v; the in-flight record must go with the slot", freed, err)
			}
			r.doneRecorded("a", true)
			b := r.fleet("b", "", 2*time.Second)
			hb := r.mustAdmit(b)
			testsupport.Eventually(t, 10*time.Second, "b's slot to run out", func() bool { return !r.exists(b.Key()) })
			r.refused(r.fleet("c", "", time.Minute), RuleHalted)
			if resumedFirst {
				r.resume("b is lost")
			}
			x.BootID = "boot-b-2"
			if _, err := x.Complete(ctx, NewClaim(b, hb.Leases, time.Now(), 1)); !errors.Is(err, ErrExpired) {
				t.Fatalf("late complete: %v, want ErrExpired", err)
			}
			if r.exists(InflightKey(r.ns, "b")) {
				t.Fatal("the late completion left the in-flight record")
			}
			r.doneRecorded("b", false)
			failures, _ := r.c.Get(ctx, FailuresDir(r.ns), clientv3.WithPrefix())
			if !resumedFirst {
				if len(failures.Kvs) != 1 {
					t.Fatalf("%d failure records after b's late return, want 1", len(failures.Kvs))
				}
				if _, err := r.c.Delete(ctx, HaltsDir(r.ns), clientv3.WithPrefix()); err != nil {
					t.Fatal(err)
				}
				// The halt key gone (a compromised node?), the failure still counts.
				r.refused(r.fleet("c", "", time.Minute), RuleHalted)
				return
			}
			// The resume named b's loss: recorded when b came back, it keeps
			// its name and stays acknowledged.
			if len(failures.Kvs) != 1 {
				t.Fatalf("%d failure records after b's late return, want 1 (acknowledged)", len(failures.Kvs))
			}
			r.mustAdmit(r.fleet("c", "", time.Minute))
		})
	}
}

// doneRecorded asserts whether node's completion is recorded (DoneKey),
// on a lease of the failure window, with the reboot's duration since the
// slot was taken.
func (r *rig) doneRecorded(node string, want bool) {
	r.t.Helper()
	resp, err := r.c.Get(context.Background(), DoneKey(r.ns, node))
	if err != nil {
		r.t.Fatal(err)
	}
	if !want {
		if len(resp.Kvs) > 0 {
			r.t.Fatalf("%s: a completion record %s for a reboot that did not complete in time", node, resp.Kvs[0].Value)
		}
		return
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		r.t.Fatalf("%s: no completion record on a lease after its completion", node)
	}
	var d Done
	if err := json.Unmarshal(resp.Kvs[0].Value, &d); err != nil || !d.Measured() || d.Node != node || d.BootID == "" {
		r.t.Fatalf("%s: completion record %s (%v): want the node, its new boot and a measured duration", node, resp.Kvs[0].Value, err)
	}
	ttl, err := r.c.TimeToLive(context.Background(), clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil || ttl.GrantedTTL != 3600 {
		r.t.Fatalf("%s: completion record's lease %+v (%v), want failure_window_sec 3600", node, ttl, err)
	}
	c, err := r.fleet("z", "", time.Minute).CountAll(context.Background(), "")
	if err != nil || len(c.Rollout.Done) != 1 || c.Rollout.Done[0].Node != node {
		r.t.Fatalf("status's count reads completions %+v (%v), want %s's", c.Rollout.Done, err, node)
	}
	// The admission's own count does not: one per node rebooted within the
	// failure window would grow every admission's read with the fleet.
	if c, err := r.fleet("z", "", time.Minute).Count(context.Background(), ""); err != nil || len(c.Rollout.Done) != 0 {
		r.t.Fatalf("the admission's count reads completions %+v (%v)", c.Rollout.Done, err)
	}
}

// An abort before the reboot command gives back the in-flight record before
// the slot: no failure, and no start counted against the rate.
func TestAbortIsNoFailure(t *testing.T) {
	r := newRig(t)
	perHour := func(f *Fleet) { f.Rules.MaxStartsPerHour = 1 }
	a := r.fleet("a", "", time.Minute, perHour)
	h := r.mustAdmit(a)
	if err := Abort(context.Background(), r.c, h.Leases); err != nil {
		t.Fatal(err)
	}
	r.mustAdmit(r.fleet("b", "", time.Minute, perHour))
}

// Budgets: percentages of the scope's nodes, and the strictest of the
// entry point's and the live records' and slots' values.
func TestBudgets(t *testing.T) {
	t.Run("a percentage of the group's nodes, at least 1", func(t *testing.T) {
		r := newRig(t)
		pct := func(f *Fleet) { f.Rules.MaxHolders = config.Budget{Percent: 20} }
		for i := range 10 {
			r.record(r.fleet(fmt.Sprintf("n%d", i), "", time.Minute, pct), policy.StateIdle, false)
			// Another group's nodes are not of this group's scope.
			r.record(r.fleet(fmt.Sprintf("w%d", i), "web", time.Minute, pct), policy.StateIdle, false)
		}
		r.mustAdmit(r.fleet("n0", "", time.Minute, pct))
		r.mustAdmit(r.fleet("n1", "", time.Minute, pct))
		v := r.refused(r.fleet("n2", "", time.Minute, pct), RuleMaxHolders)
		if v.Rules.MaxHolders != 2 || !strings.Contains(v.Reason, "20% of 10 nodes") {
			t.Fatalf("effective %d, reason %q: want 2 = 20%% of 10", v.Rules.MaxHolders, v.Reason)
		}
	})
	t.Run("the strictest among the live records", func(t *testing.T) {
		r := newRig(t)
		three := func(f *Fleet) { f.Rules.MaxHolders = config.Count(3) }
		one := func(f *Fleet) { f.Rules.MaxHolders = config.Count(1) }
		// The group's daemon says 1; a server configured with 3 learns it.
		r.record(r.fleet("db1", "db", time.Minute, one), policy.StateIdle, false)
		r.mustAdmit(r.fleet("z1", "db", time.Minute, three))
		r.refused(r.fleet("z2", "db", time.Minute, three), RuleMaxHolders)
		// Another group's record does not bind this group.
		r.record(r.fleet("w1", "web", time.Minute, one), policy.StateIdle, false)
		r.mustAdmit(r.fleet("z3", "other", time.Minute, three))
	})
	t.Run("the fleet's budget from another group's record", func(t *testing.T) {
		r := newRig(t)
		total1 := func(f *Fleet) { f.Rules.MaxTotal = config.Count(1) }
		r.record(r.fleet("d1", "db", time.Minute, total1), policy.StateIdle, false)
		r.mustAdmit(r.fleet("f1", "web", time.Minute))
		r.refused(r.fleet("f2", "db", time.Minute), RuleMaxTotal)
	})
}

// Pacing and the rate are timed by etcd's leases: the wait ends when the
// pacing record's lease does, whatever the clocks say.
func TestPacingIsTimedByLeases(t *testing.T) {
	r := newRig(t)
	paced := func(f *Fleet) {
		f.Rules.MinIntervalSec = 3
		f.Rules.MaxHolders = config.Count(5)
		f.Now = func() time.Time { return time.Now().Add(-48 * time.Hour) } // a clock two days wrong
	}
	r.mustAdmit(r.fleet("a", "g", time.Minute, paced))
	v := r.refused(r.fleet("b", "g", time.Minute, paced), RuleMinInterval)
	if !v.Wait {
		t.Fatal("pacing must wait, not refuse")
	}
	r.mustAdmit(r.fleet("c", "other", time.Minute, paced)) // another group is not paced by g
	testsupport.Eventually(t, 10*time.Second, "the pacing lease to end", func() bool {
		_, err := r.admit(r.fleet("b", "g", time.Minute, paced))
		return err == nil
	})
	t.Run("rate", func(t *testing.T) {
		r := newRig(t)
		rate := func(f *Fleet) { f.Rules.MaxStartsPerHour = 2 }
		r.mustAdmit(r.fleet("a", "g1", time.Minute, rate))
		r.mustAdmit(r.fleet("b", "g2", time.Minute, rate))
		v := r.refused(r.fleet("c", "g3", time.Minute, rate), RuleRate)
		if !v.Wait || !strings.Contains(v.Reason, "2 reboots started") {
			t.Fatalf("verdict %+v", v)
		}
	})
}

// A node of wave k waits for every lower wave's pending reboots, then for
// wave_bake_sec after the last of them completed; a held or timed-out
// lower-wave node does not stall it.
func TestWaves(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	wave := func(w int) func(*Fleet) {
		return func(f *Fleet) { f.Wave, f.Rules.MaxHolders, f.Rules.WaveBakeSec = w, config.Count(5), 3 }
	}
	canary := r.fleet("canary", "", time.Minute, wave(0))
	r.record(canary, policy.StateNeedsReboot, true)
	w1 := r.fleet("w1", "", time.Minute, wave(1))
	v := r.refused(w1, RuleWave)
	if !strings.Contains(v.Reason, "canary (wave 0") {
		t.Fatalf("reason %q does not name the canary", v.Reason)
	}
	h := r.mustAdmit(canary)
	r.refused(w1, RuleWave) // the canary's slot is in flight
	x := Completion{Client: r.c, NS: r.ns, BootID: "boot-canary-2", WaveBakeSec: 3}
	if _, err := x.Complete(ctx, NewClaim(canary, h.Leases, time.Now(), 1)); err != nil {
		t.Fatal(err)
	}
	r.record(canary, policy.StateIdle, false)
	v = r.refused(w1, RuleWave)
	if !strings.Contains(v.Reason, "wave_bake_sec") {
		t.Fatalf("reason %q, want the bake time", v.Reason)
	}
	testsupport.Eventually(t, 10*time.Second, "the bake time to end", func() bool { _, err := r.admit(w1); return err == nil })

	t.Run("a bake mark without its lease", func(t *testing.T) {
		// etcd grants no lease for the mark: the completion fails and the
		// slot stays (the later waves wait for it), rather than freeing
		// it without the mark and letting them start at once.
		r := newRig(t)
		canary := r.fleet("canary", "", time.Minute, wave(0))
		w1 := r.fleet("w1", "", time.Minute, wave(1))
		h := r.mustAdmit(canary)
		noBake := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if q, ok := req.(*etcdserverpb.LeaseGrantRequest); ok && q.TTL == 3 {
				return errors.New("lease grant refused by the test")
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		x := Completion{Client: watchedClient(t, noBake), NS: r.ns, BootID: "boot-canary-2", WaveBakeSec: 3}
		if freed, err := x.Complete(ctx, NewClaim(canary, h.Leases, time.Now(), 1)); err == nil || freed || !strings.Contains(err.Error(), "wave_bake_sec") {
			t.Fatalf("complete without the mark's lease: freed %v, err %v; want an error naming wave_bake_sec", freed, err)
		}
		if !r.exists(canary.Key()) {
			t.Fatal("the slot was freed without its bake mark")
		}
		r.refused(w1, RuleWave)
		x.Client = r.c
		if freed, err := x.Complete(ctx, NewClaim(canary, h.Leases, time.Now(), 1)); err != nil || !freed {
			t.Fatalf("complete again: freed %v, err %v", freed, err)
		}
		if v := r.refused(w1, RuleWave); !strings.Contains(v.Reason, "wave_bake_sec") {
			t.Fatalf("reason %q, want the bake time", v.Reason)
		}
	})

	t.Run("held or timed out", func(t *testing.T) {
		r := newRig(t)
		timeout := func(f *Fleet) { wave(1)(f); f.Rules.WaveTimeoutSec = 2 }
		canaries := func(f *Fleet) { wave(0)(f); f.Rules.WaveTimeoutSec = 2 }
		// c1 has needed its reboot for longer than wave_timeout_sec by
		// etcd's measure (its needs lease's age), whatever its clock said.
		g, err := r.c.Grant(ctx, 600)
		if err != nil {
			t.Fatal(err)
		}
		recent := time.Now()
		r.record(r.fleet("c1", "", time.Minute, canaries), policy.StateBlocked, true, func(n *policy.NodeRecord) {
			n.NeedsRebootSince, n.NeedsRebootLease = &recent, fmt.Sprintf("%x", int64(g.ID))
		})
		r.record(r.fleet("c2", "", time.Minute, canaries), policy.StateBlocked, true)
		r.put(HoldKey(r.ns, "c2"), `{"reason":"disk","by":"op"}`, 0)
		v := r.refused(r.fleet("w1", "", time.Minute, timeout), RuleWave)
		if !strings.Contains(v.Reason, "c1 (wave 0") {
			t.Fatalf("reason %q, want c1 still waited for", v.Reason)
		}
		testsupport.Eventually(t, 10*time.Second, "c1's need to outlast wave_timeout_sec", func() bool {
			_, err := r.admit(r.fleet("w1", "", time.Minute, timeout))
			return err == nil
		})
	})

	t.Run("a record's clock plays no part", func(t *testing.T) {
		r := newRig(t)
		// c1 says it has needed its reboot for two days (its clock is far
		// ahead, or its record is an older version's): without a needs
		// lease that etcd has aged, it is waited for.
		old := time.Now().Add(-48 * time.Hour)
		r.record(r.fleet("c1", "", time.Minute, wave(0)), policy.StateBlocked, true, func(n *policy.NodeRecord) { n.NeedsRebootSince = &old })
		r.refused(r.fleet("w1", "", time.Minute, wave(1)), RuleWave)
	})
}

// The operator's rules: the pause and the node's hold refuse; another
// machine's slot under this name refuses, and never spins.
func TestOperatorAndConflicts(t *testing.T) {
	r := newRig(t)
	a := r.fleet("a", "", time.Minute)
	r.put(HoldKey(r.ns, "a"), `{"reason":"disk","by":"op"}`, 0)
	v := r.refused(a, RuleHeld)
	if exitcode.CodeOf(v.Err()) != exitcode.KillSwitch {
		t.Errorf("held: code %d", exitcode.CodeOf(v.Err()))
	}
	r.put(PauseKey(r.ns), `{"reason":"freeze","by":"op"}`, 0)
	r.refused(a, RulePaused)
	_, _ = r.c.Delete(context.Background(), PauseKey(r.ns))
	_, _ = r.c.Delete(context.Background(), HoldKey(r.ns, "a"))

	// This machine's slot of an earlier boot (complete never ran).
	earlier := r.fleet("a", "", time.Minute)
	earlier.BootID = "boot-a-0"
	r.mustAdmit(earlier)
	v = r.refused(a, RuleConflict)
	if !strings.Contains(v.Reason, "another boot's") || !strings.Contains(v.Reason, "etcdctl del") {
		t.Errorf("reason %q does not say what to do", v.Reason)
	}
	t.Run("a FleetLock client with this node's name", func(t *testing.T) {
		r := newRig(t)
		fl := r.fleet("web1", "", time.Minute)
		fl.BootID, fl.MachineID, fl.Via = "fleetlock:web1", "", ViaFleetLock
		r.mustAdmit(fl)
		v := r.refused(r.fleet("web1", "", time.Minute), RuleConflict)
		if !strings.Contains(v.Reason, "FleetLock client") {
			t.Errorf("reason %q", v.Reason)
		}
	})
}

// Under max_holders_total the nodes that waited longest go first, whatever
// kind of node asks and however quickly.
func TestFleetBudgetIsFair(t *testing.T) {
	r := newRig(t)
	total := func(f *Fleet) { f.Rules.MaxTotal = config.Count(1) }
	first := r.mustAdmit(r.fleet("a", "g1", time.Minute, total))
	// b (a FleetLock client, g2) asks first and leaves a ticket; c (g3)
	// asks later.
	b := r.fleet("b", "g2", time.Minute, total)
	c := r.fleet("c", "g3", time.Minute, total)
	ctx := context.Background()
	ab := Admission{Fleet: b, TicketTTL: time.Minute}
	if _, err := ab.Admit(ctx); err == nil {
		t.Fatal("b admitted beside a")
	}
	ac := Admission{Fleet: c, TicketTTL: time.Minute}
	if _, err := ac.Admit(ctx); err == nil {
		t.Fatal("c admitted beside a")
	}
	if err := Abort(ctx, r.c, first.Leases); err != nil {
		t.Fatal(err)
	}
	// c asks first now that there is room: b waited longer.
	out, err := ac.Admit(ctx)
	var ref *slotinfo.Refusal
	if !errors.As(err, &ref) || ref.Rule != RuleMaxTotal || !strings.Contains(ref.Reason, "b (group g2)") {
		t.Fatalf("c: %v (held %v), want to wait behind b", err, out.Reboot != nil)
	}
	if out, err := ab.Admit(ctx); err != nil || out.Reboot == nil {
		t.Fatalf("b: %v, want its turn", err)
	}
	if r.exists(QueueDir(r.ns) + "b") {
		t.Error("b's ticket outlived its take")
	}
}

// Completing a reboot frees its slot and in-flight record, not its start
// and pacing records: min_interval_sec and max_starts_per_hour count from
// the take, whether or not the reboot is done by then (bats/e2e_failure_budget.bats
// found completion revoking them).
func TestCompletionKeepsPacingAndStarts(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	paced := func(f *Fleet) { f.Rules.MinIntervalSec = 600; f.Rules.MaxStartsPerHour = 2 }
	a := r.fleet("a", "g", time.Minute, paced)
	h := r.mustAdmit(a)
	x := Completion{Client: r.c, NS: r.ns, BootID: "boot-a-2", FailureWindowSec: 3600}
	if freed, err := x.Complete(ctx, NewClaim(a, h.Leases, time.Now(), 1)); err != nil || !freed {
		t.Fatalf("complete: freed %v err %v", freed, err)
	}
	if r.exists(a.Key()) || r.exists(InflightKey(r.ns, "a")) {
		t.Fatal("the completion left the slot or its in-flight record")
	}
	r.refused(r.fleet("b", "g", time.Minute, paced), RuleMinInterval)
	c := r.fleet("c", "other", time.Minute, paced)
	hc := r.mustAdmit(c)
	x.BootID = "boot-c-2"
	if _, err := x.Complete(ctx, NewClaim(c, hc.Leases, time.Now(), 1)); err != nil {
		t.Fatal(err)
	}
	v := r.refused(r.fleet("d", "third", time.Minute, paced), RuleRate)
	if !strings.Contains(v.Reason, "2 reboots started") {
		t.Fatalf("reason %q: want the two completed reboots counted", v.Reason)
	}
}

// A percentage's seats count the nodes the admission counts: a node down in
// its reboot for longer than its record's lease is still one of them by its
// slot. Counting records alone made "50%" of four nodes one seat whenever a
// node was down, and the line's smallest seat number capped the budget at 1
// (bats/e2e_failure_budget.bats found it).
func TestPercentSeatsCountNodesDown(t *testing.T) {
	r := newRig(t)
	half := func(f *Fleet) { f.Rules.MaxHolders = config.Budget{Percent: 50} }
	for i := range 4 {
		r.record(r.fleet(fmt.Sprintf("n%d", i), "", time.Minute, half), policy.StateIdle, false)
	}
	n1 := r.fleet("n1", "", time.Minute, half)
	if seats, err := n1.Seats(context.Background()); err != nil || seats != 2 {
		t.Fatalf("seats %d, %v: want 2 = 50%% of 4", seats, err)
	}
	// n0 is down: its slot lives, its record has run out.
	r.mustAdmit(r.fleet("n0", "", time.Minute, half))
	if _, err := r.c.Delete(context.Background(), RecordKey(r.ns, "n0")); err != nil {
		t.Fatal(err)
	}
	if seats, err := n1.Seats(context.Background()); err != nil || seats != 2 {
		t.Fatalf("seats %d, %v with n0 down: want 2 = 50%% of 4 (3 records, 1 slot without one)", seats, err)
	}
}

// Inside a group, a FleetLock client (which cannot wait under a seat) keeps
// a group ticket, and a daemon that joined the group's line after it
// yields: it is refused without waiting and gives up its seat; a daemon
// that joined before it goes first.
func TestGroupLineHasFleetLockClients(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	seat := func(f Fleet) *lock.Held {
		t.Helper()
		h, err := lock.Acquire(ctx, r.c, lock.Options{Key: f.SeatKey(), MaxHolders: 1, TTL: 10 * time.Second, Node: f.Node, BootID: f.BootID, MachineID: f.MachineID})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Release(ctx) })
		return h
	}
	first := r.mustAdmit(r.fleet("d0", "g", time.Minute))
	// d1 joined the line before the FleetLock client asked.
	d1 := r.fleet("d1", "g", time.Minute)
	s1 := seat(d1)
	fl := r.fleet("z1", "g", time.Minute)
	fl.BootID, fl.MachineID, fl.Via = "fleetlock:z1", "", ViaFleetLock
	az := Admission{Fleet: fl, TicketTTL: time.Minute}
	if _, err := az.Admit(ctx); err == nil {
		t.Fatal("z1 admitted beside d0")
	}
	if !r.exists(QueueDir(r.ns) + "z1") {
		t.Fatal("the refused FleetLock client has no ticket")
	}
	if err := Abort(ctx, r.c, first.Leases); err != nil {
		t.Fatal(err)
	}
	// d1's seat is older than z1's ticket: d1 goes first.
	a1 := Admission{Fleet: d1, Seat: s1}
	out, err := a1.Admit(ctx)
	if err != nil || out.Reboot == nil {
		t.Fatalf("d1 (in line before z1): %v, want its turn", err)
	}
	_ = s1.Release(ctx)
	if err := Abort(ctx, r.c, out.Reboot.Leases); err != nil {
		t.Fatal(err)
	}
	// d2 joins the line after z1's ticket: refused, not told to wait.
	d2 := r.fleet("d2", "g", time.Minute)
	s2 := seat(d2)
	a2 := Admission{Fleet: d2, Seat: s2, Wait: true}
	_, err = a2.Admit(ctx)
	var ref *slotinfo.Refusal
	if !errors.As(err, &ref) || ref.Rule != RuleMaxHolders || ref.Wait || !ref.Yield || !strings.Contains(ref.Reason, "z1 (since") {
		t.Fatalf("d2: %v (%+v), want refused behind z1 without waiting", err, ref)
	}
	_ = s2.Release(ctx)
	if out, err := az.Admit(ctx); err != nil || out.Reboot == nil {
		t.Fatalf("z1: %v, want its turn", err)
	}
	if r.exists(QueueDir(r.ns) + "z1") {
		t.Error("z1's ticket outlived its take")
	}
}

// Under max_holders_total, a daemon holding its group's seat does not wait
// behind a FleetLock client of its own group that waited longer: that
// client needs the seat to take its turn, so the daemon gives it up.
func TestFleetLineYieldsTheSeat(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	total := func(f *Fleet) { f.Rules.MaxTotal = config.Count(1); f.Rules.MaxHolders = config.Count(2) }
	first := r.mustAdmit(r.fleet("o1", "other", time.Minute, total))
	fl := r.fleet("z1", "g", time.Minute, total)
	fl.BootID, fl.MachineID, fl.Via = "fleetlock:z1", "", ViaFleetLock
	az := Admission{Fleet: fl, TicketTTL: time.Minute}
	if _, err := az.Admit(ctx); err == nil {
		t.Fatal("z1 admitted beside o1")
	}
	if err := Abort(ctx, r.c, first.Leases); err != nil {
		t.Fatal(err)
	}
	d := r.fleet("d1", "g", time.Minute, total)
	h, err := lock.Acquire(ctx, r.c, lock.Options{Key: d.SeatKey(), MaxHolders: 1, TTL: 10 * time.Second, Node: d.Node, BootID: d.BootID, MachineID: d.MachineID})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Release(ctx) }()
	ad := Admission{Fleet: d, Seat: h, Wait: true}
	_, err = ad.Admit(ctx)
	var ref *slotinfo.Refusal
	if !errors.As(err, &ref) || ref.Rule != RuleMaxTotal || ref.Wait || !ref.Yield || !strings.Contains(ref.Reason, "need this node's lock seat") {
		t.Fatalf("d1: %v, want refused without waiting, the seat given up for z1", err)
	}
	// A daemon of another group waits behind z1 as usual.
	o := r.fleet("o2", "other", time.Minute, total)
	v := r.refused(o, RuleMaxTotal)
	if !v.Wait {
		t.Errorf("o2: %q, want a wait", v.Reason)
	}
}
