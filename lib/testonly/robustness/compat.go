package robustness

import (
	"context"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// The calls whose names differ between versions of lib/slot and lib/lock,
// in one place: running this package against an older tree (to show that
// it finds the holes later fixed, docs/testing.md "Robustness") changes only
// this file.

// rebootSlot is a reboot taken by the admission, from its take to its end.
type rebootSlot = *slot.Reboot

// candidateSeat marks a seat as an admission candidate's.
func candidateSeat(o *lock.Options) { o.Candidate = true }

// takenReboot is the reboot an admission took (nil: none).
func takenReboot(out slot.Outcome) rebootSlot { return out.Reboot }

// startReboot is the last moment before the reboot command.
func startReboot(ctx context.Context, r rebootSlot) error { return r.Start(ctx) }

// markStarted records a reboot command that ran without the start gate.
func markStarted(ctx context.Context, r rebootSlot) error { return r.MarkStarted(ctx) }

// abortReboot gives the slot of a reboot that did not start back.
func abortReboot(ctx context.Context, _ *clientv3.Client, r rebootSlot) error { return r.Abort(ctx) }

// rebootLease is the slot's lease.
func rebootLease(r rebootSlot) clientv3.LeaseID { return r.Lease }

// resumeRollout is `clusterrebootd resume --reason` (with --group when
// group is set) as driver/cluster runs it (lib/slot Fleet.Resume). It says
// what it did.
func resumeRollout(ctx context.Context, f slot.Fleet, group *string, reason string) (string, error) {
	r, err := f.Resume(ctx, slot.ResumeRequest{Group: group, By: f.Node, Reason: reason})
	if err != nil {
		return "", err
	}
	if r.Ack == nil {
		return "lifted the pause (not halted)", nil
	}
	// A failure's id is node/<slot lease>; etcd picks the lease ids, so
	// the schedule names the nodes only (a replay must read the same).
	var nodes []string
	for _, id := range r.Ack.Acknowledged {
		node, _, _ := strings.Cut(id, "/")
		nodes = append(nodes, node)
	}
	what := "the halted rollout"
	if group != nil {
		what = "the halted group " + *group
	}
	return "resumed " + what + ", acknowledging " + joinOr(nodes, "nothing"), nil
}
