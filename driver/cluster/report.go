package cluster

import (
	"context"
	"slices"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// report reads every node the cluster knows in one transaction (lib/slot
// Count: the health records, slots, completions and failures) and makes a
// row of each, for the compliance report. It writes nothing.
func (s *session) report(ctx context.Context, res *protocol.ReportResult) error {
	bootID, machineID, _ := s.w.ids()
	f := slot.FromConfig(s.client, s.cfg, bootID, machineID, slot.ViaDaemon)
	f.RPCTimeout, f.Now = s.rpc, s.w.now
	n, err := f.CountAll(ctx, "")
	if err != nil {
		return s.etcdErr(ctx, "reading the nodes' records under "+s.ns, err)
	}
	res.ReadAt = n.View.ReadAt
	res.Nodes = []protocol.ReportRow{}
	for _, p := range slot.Progress(n) {
		res.Nodes = append(res.Nodes, rowOf(p, res))
	}
	return nil
}

// rowOf is one node's row: its record's fields when it has a live one,
// else what its slot, completion and failures say.
func rowOf(p slot.NodeProgress, res *protocol.ReportResult) protocol.ReportRow {
	row := protocol.ReportRow{Node: p.Node, Group: p.Group, Wave: p.Wave, Progress: p.Progress, Held: p.Hold != nil, Failures: []string{}}
	if r := p.Record; r != nil {
		row.State, row.RebootRequired, row.NeedsRebootSince = r.State, ptr(r.RebootRequired), r.NeedsRebootSince
		row.KernelRunning, row.KernelInstalled, row.Version, row.Reason = r.KernelRunning, r.KernelInstalled, r.Version, r.Reason
		if !r.LastCheck.IsZero() {
			row.LastCheck = ptr(r.LastCheck.UTC())
		}
		if b := r.BootedAt; b != nil {
			row.BootedAt = ptr(b.UTC())
			if up := int64(res.ReadAt.Sub(*b).Seconds()); up >= 0 {
				row.UptimeSec = &up
			}
		}
	} else if p.Slot != nil {
		row.RebootRequired = ptr(true) // rebooting: its reboot is not done
	}
	if d := p.Done; d != nil && !d.At.IsZero() {
		row.LastReboot = ptr(d.At.UTC())
		if d.Measured() {
			row.LastRebootSec = ptr(d.DurationMS / 1000)
		}
	}
	for _, x := range p.Failures {
		if !slices.Contains(row.Failures, x.Kind) {
			row.Failures = append(row.Failures, x.Kind)
		}
	}
	slices.Sort(row.Failures)
	return row
}
