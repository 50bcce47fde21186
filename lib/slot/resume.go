package slot

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// ResumeRequest is what an operator's resume asks (`clusterrebootd
// resume`, docs/rollout.md "Resuming").
type ResumeRequest struct {
	// Group, when set, ends that group's halt alone (failure_scope group):
	// only its failures are acknowledged, and every other group's halt and
	// failures stay as they are. Nil: every halt of every scope, and every
	// failure within the window.
	Group *string
	// By and Reason are recorded with the acknowledgement (Reason as the
	// caller gives it: one line); Reason is required while the scope
	// resumed is halted.
	By, Reason string
}

// Resumed is what a resume did.
type Resumed struct {
	// PauseLifted says the cluster-wide pause was there and is gone.
	PauseLifted bool
	// Recorded is the halt this resume recorded itself: the budget was
	// spent while no admission looked (a pause). Its caller notifies.
	Recorded *Halt
	// Ended are the halts this resume deleted; Ack is the acknowledgement
	// it wrote (nil: the scope was not halted, only the pause was lifted).
	Ended []Halt
	Ack   *Ack
	// Acknowledged are the failures this resume acknowledged that the last
	// one did not, oldest first.
	Acknowledged []slotinfo.Failure
	// StillHalted are the halts left (a resume of one group: the others').
	StillHalted []Halt
}

// resumeAttempts bounds the counts of one resume: each is retried when the
// acknowledgement or a halt changed between its count and its write (two
// operators resuming at once).
const resumeAttempts = 3

// errResumeRaced: the acknowledgement or a halt changed since the count.
var errResumeRaced = errors.New("the rollout's acknowledgement or halts changed while this resume ran")

// Resume ends a halted rollout and lifts the cluster-wide pause: it counts;
// records the halt when the scope's budget is spent and no halt says so yet
// (a budget spent during a pause still halts, and is notified, before it is
// resumed); refuses without a reason while halted; deletes the pause; then,
// when halted, deletes the scope's halts and writes the acknowledgement, in
// one transaction guarded by "no acknowledgement and no halt written since
// the count". The acknowledgement names the failures it covers (FailureID):
// every failure within the window, or for a group, the group's and every
// failure the last acknowledgement covered (another group's failures keep
// counting). A failure it does not name, such as a reboot in flight now
// that is lost later, counts against the budget again.
//
// Errors carry their exit code: exitcode.Config for a request that does not
// fit the rollout (no reason while halted, --group with failure_scope
// fleet or a halt of the whole fleet, a group that is not halted),
// exitcode.LockBusy when other resumes kept changing the acknowledgement;
// any other error is etcd's.
func (f Fleet) Resume(ctx context.Context, q ResumeRequest) (Resumed, error) {
	if q.Group != nil {
		f.Group = *q.Group
	}
	var recorded *Halt
	for attempt := 0; ; attempt++ {
		r, err := f.resume(ctx, q, recorded == nil)
		if r.Recorded != nil {
			recorded = r.Recorded
		}
		r.Recorded = recorded
		switch {
		case errors.Is(err, errResumeRaced) && attempt+1 < resumeAttempts:
			continue
		case errors.Is(err, errResumeRaced):
			return r, exitcode.Errorf(exitcode.LockBusy, "%v %d times (other resumes at the same time): nothing was acknowledged; run it again", err, resumeAttempts)
		}
		return r, err
	}
}

// resume is one count and one write of Resume; record allows it to record
// the halt (once per Resume).
func (f Fleet) resume(ctx context.Context, q ResumeRequest, record bool) (Resumed, error) {
	var r Resumed
	n, err := f.Count(ctx, "")
	if err != nil {
		return r, err
	}
	v := f.Decide(n)
	failures := f.Failures(n, v.Rules)
	spent := v.Rules.MaxFailures > 0 && len(failures) >= v.Rules.MaxFailures
	if q.Group != nil {
		if v.Rules.FailureScope != config.ScopeGroup {
			return r, exitcode.Errorf(exitcode.Config, "--group: the failure budget here is the fleet's (failure_scope %s): one halt covers every group; resume without --group", orUnknown(v.Rules.FailureScope))
		}
		for _, h := range n.Rollout.Halts {
			if h.Scope != config.ScopeGroup {
				return r, exitcode.Errorf(exitcode.Config, "--group: a halt of the whole fleet (%s) covers %s too; resume without --group", h.Reason, groupName(f.Group))
			}
		}
	}
	ended, rest := splitHalts(n.Rollout.Halts, q.Group)
	if spent && n.Rollout.HaltOf(f.Group) == nil && record && f.Halt(ctx, n, v) {
		h := Halt{Reason: HaltReason(v.Failures, v.Rules), Scope: v.Rules.FailureScope, Failures: v.Failures}
		r.Recorded = &h
		// Count again: the halt just written is one to end.
		return r, errResumeRaced
	}
	halted := len(ended) > 0 || spent
	if halted && strings.TrimSpace(q.Reason) == "" {
		why := "the failures reached the budget"
		if len(ended) > 0 {
			why = ended[0].Reason
		}
		return r, exitcode.Errorf(exitcode.Config, "the rollout halted itself (%s); nothing was changed: look at the failed nodes, then say why it may go on, e.g. --reason \"kernel 6.1.0-28 fixed, node-3 reinstalled\"", why)
	}
	if q.Group != nil && !halted {
		return r, exitcode.Errorf(exitcode.Config, "--group %q: %s is not halted (%s); nothing was changed: check the group's name", f.Group, groupName(f.Group), haltsSummary(n.Rollout.Halts))
	}
	rctx, cancel := context.WithTimeout(ctx, 2*f.RPCTimeout)
	defer cancel()
	resp, err := f.Client.Delete(rctx, PauseKey(f.NS))
	if err != nil {
		return r, err
	}
	r.PauseLifted = resp.Deleted > 0
	if !halted {
		return r, nil
	}
	a, ops := f.acknowledge(n, q, ended, rest)
	val, _ := json.Marshal(a)
	ops = append(ops, clientv3.OpPut(AckKey(f.NS), string(val)))
	guard := clientv3.Compare(clientv3.ModRevision(HaltsDir(f.NS)), "<", n.Revision+1).WithPrefix()
	tx, err := f.Client.Txn(rctx).If(guard,
		clientv3.Compare(clientv3.ModRevision(AckKey(f.NS)), "<", n.Revision+1),
		clientv3.Compare(clientv3.ModRevision(LegacyHaltKey(f.NS)), "<", n.Revision+1)).Then(ops...).Commit()
	if err != nil {
		return r, err
	}
	if !tx.Succeeded {
		return r, errResumeRaced
	}
	for _, x := range FailuresInWindow(n) {
		if !n.Rollout.Ack.Acks(f.NS, x) && slices.Contains(a.Acknowledged, FailureID(f.NS, x)) {
			r.Acknowledged = append(r.Acknowledged, x)
		}
	}
	r.Ack, r.Ended, r.StillHalted = &a, ended, rest
	return r, nil
}

// splitHalts sorts the halts into those a resume of group (nil: every
// scope) ends and those it leaves. The older versions' key is neither: it
// is rewritten by acknowledge.
func splitHalts(hs []Halt, group *string) (ended, rest []Halt) {
	for _, h := range hs {
		switch {
		case group == nil || (h.Scope == config.ScopeGroup && h.Group == *group):
			ended = append(ended, h)
		default:
			rest = append(rest, h)
		}
	}
	return ended, rest
}

// acknowledge is the acknowledgement of a resume and the writes that end
// its halts. Every scope: every failure within the window, at n's revision
// (older readers acknowledge every failure created at or before it), and
// every halt deleted. One group: that group's failures and every failure
// the last acknowledgement covered, at the last acknowledgement's revision
// (older readers, which cannot tell the groups apart, acknowledge nothing
// new and stay halted until a resume of every scope); the group's halts
// deleted, and the older versions' key, which older nodes read as the
// fleet's one halt, deleted only when no other halt is left, else made a
// copy of one that is left.
func (f Fleet) acknowledge(n Count, q ResumeRequest, ended, rest []Halt) (Ack, []clientv3.Op) {
	a := Ack{V: policy.ProtocolVersion, By: q.By, Reason: q.Reason, Since: f.now().UTC(), Revision: n.Revision, Acknowledged: []string{}}
	if q.Group != nil {
		a.Scope = ScopeID(config.ScopeGroup, f.Group)
		a.Revision = 0
		if n.Rollout.Ack != nil {
			a.Revision = n.Rollout.Ack.Revision
		}
	}
	for _, x := range FailuresInWindow(n) {
		covered := q.Group == nil || x.Group == f.Group || n.Rollout.Ack.Acks(f.NS, x)
		if id := FailureID(f.NS, x); covered && !slices.Contains(a.Acknowledged, id) {
			a.Acknowledged = append(a.Acknowledged, id)
		}
	}
	if q.Group == nil {
		return a, []clientv3.Op{clientv3.OpDelete(HaltsDir(f.NS), clientv3.WithPrefix()), clientv3.OpDelete(LegacyHaltKey(f.NS))}
	}
	var ops []clientv3.Op
	var left []Halt
	for _, h := range ended {
		if h.Key != LegacyHaltKey(f.NS) {
			ops = append(ops, clientv3.OpDelete(h.Key))
		}
	}
	for _, h := range rest {
		if h.Key != LegacyHaltKey(f.NS) {
			left = append(left, h)
		}
	}
	switch {
	case !slices.ContainsFunc(ended, func(h Halt) bool { return h.Key == LegacyHaltKey(f.NS) }):
		// The older versions' key, if any, is another group's: it stays.
	case len(left) == 0:
		ops = append(ops, clientv3.OpDelete(LegacyHaltKey(f.NS)))
	default:
		val, _ := json.Marshal(left[0])
		ops = append(ops, clientv3.OpPut(LegacyHaltKey(f.NS), string(val)))
	}
	return a, ops
}

// haltsSummary names the scopes halted, for an error.
func haltsSummary(hs []Halt) string {
	if len(hs) == 0 {
		return "nothing is halted"
	}
	var names []string
	for _, h := range hs {
		name := "the whole fleet"
		if h.Scope == config.ScopeGroup {
			name = groupName(h.Group)
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return "halted: " + strings.Join(names, ", ")
}
