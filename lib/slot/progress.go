package slot

import (
	"sort"

	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// Where a node is in the rollout (docs/rollout.md, "Seeing the rollout"):
// NodeProgress.Progress, decided in this order.
const (
	// ProgressDown: a reboot slot is held under the node's name: it is
	// rebooting, or back and running its post-reboot checks.
	ProgressDown = "down"
	// ProgressWaiting: its live record says a reboot is needed and it is
	// queued for the lock or blocked (state waiting or blocked).
	ProgressWaiting = "waiting"
	// ProgressNeedReboot: its live record says a reboot is needed, and it
	// is neither queued nor blocked (yet).
	ProgressNeedReboot = "need_reboot"
	// ProgressDone: it completed a coordinated reboot within the failure
	// window (a done record) and needs none now.
	ProgressDone = "done"
	// ProgressUpToDate: its live record says no reboot is needed, and it
	// completed none within the failure window.
	ProgressUpToDate = "up_to_date"
	// ProgressUnknown: no live record and no slot: the node is offline, or
	// a pipeline or FleetLock node known only by its failures.
	ProgressUnknown = "unknown"
)

// NodeProgress is one node as a count shows it: what its live record, its
// slot, its last completion and its failures say.
type NodeProgress struct {
	Node  string
	Group string
	Wave  int
	// Progress is one of the Progress* values.
	Progress string
	// Record is the node's live health record, Slot its reboot slot, Done
	// its last completion within the failure window, Hold an operator's
	// hold (nil: none).
	Record *policy.NodeRecord
	Slot   *Parsed
	Done   *Done
	Hold   *policy.Override
	// Failures are its failures within the failure window, acknowledged
	// by a resume or not (FailuresInWindow), oldest first.
	Failures []slotinfo.Failure
}

// Progress is every node the count knows (health records, slots,
// completions, failures), sorted by name, each with where it is in the
// rollout. A node's group and wave are its record's, else its slot's,
// its completion's, its first failure's.
func Progress(c Count) []NodeProgress {
	by := map[string]*NodeProgress{}
	get := func(node, group string, wave int) *NodeProgress {
		p := by[node]
		if p == nil {
			p = &NodeProgress{Node: node, Group: group, Wave: wave}
			by[node] = p
		}
		return p
	}
	for i := range c.View.Nodes {
		r := &c.View.Nodes[i]
		p := get(r.Node, r.Group, r.Wave)
		p.Record = r
	}
	for i := range c.Slots {
		s := &c.Slots[i]
		p := get(s.Node, s.Group, s.Wave)
		p.Slot = s
	}
	for i := range c.Rollout.Done {
		d := &c.Rollout.Done[i]
		p := get(d.Node, d.Group, d.Wave)
		p.Done = d
	}
	for _, x := range FailuresInWindow(c) {
		p := get(x.Node, x.Group, x.Wave)
		p.Failures = append(p.Failures, x)
	}
	for i := range c.View.Holds {
		if p := by[c.View.Holds[i].Node]; p != nil {
			p.Hold = &c.View.Holds[i]
		}
	}
	out := make([]NodeProgress, 0, len(by))
	for _, p := range by {
		p.Progress = progressOf(*p)
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

func progressOf(p NodeProgress) string {
	r := p.Record
	switch {
	case p.Slot != nil:
		return ProgressDown
	case r != nil && r.RebootRequired && (r.State == policy.StateWaiting || r.State == policy.StateBlocked):
		return ProgressWaiting
	case r != nil && r.RebootRequired:
		return ProgressNeedReboot
	case p.Done != nil:
		return ProgressDone
	case r != nil:
		return ProgressUpToDate
	}
	return ProgressUnknown
}

// Tally counts nodes per wave and group, sorted by wave, then group.
func Tally(nodes []NodeProgress) []slotinfo.GroupProgress {
	type key struct {
		wave  int
		group string
	}
	by := map[key]*slotinfo.GroupProgress{}
	for _, n := range nodes {
		k := key{n.Wave, n.Group}
		g := by[k]
		if g == nil {
			g = &slotinfo.GroupProgress{Wave: n.Wave, Group: n.Group}
			by[k] = g
		}
		g.Nodes++
		switch n.Progress {
		case ProgressWaiting:
			g.Waiting++
			g.NeedReboot++
		case ProgressNeedReboot:
			g.NeedReboot++
		case ProgressDown:
			g.Down++
		case ProgressDone:
			g.Done++
		}
		if len(n.Failures) > 0 {
			g.Failed++
		}
	}
	out := make([]slotinfo.GroupProgress, 0, len(by))
	for _, g := range by {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Wave != out[j].Wave {
			return out[i].Wave < out[j].Wave
		}
		return out[i].Group < out[j].Group
	})
	return out
}
