package cluster

import (
	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// progressOf and etaOf turn lib/slot's progress and estimate into the
// protocol's.
func progressOf(gs []slot.GroupProgress) []protocol.RolloutProgress {
	out := make([]protocol.RolloutProgress, 0, len(gs))
	for _, g := range gs {
		out = append(out, protocol.RolloutProgress(g))
	}
	return out
}

func etaOf(e slot.Estimate) protocol.RolloutETA {
	out := protocol.RolloutETA{Unknown: e.Unknown, Remaining: e.Remaining, Down: e.Down, Held: e.Held,
		MedianRebootMS: e.Reboot.Milliseconds(), Samples: e.Samples, Groups: []protocol.RolloutGroupPlan{},
		MaxTotal: e.MaxTotal, MaxStartsPerHour: e.MaxStartsPerHour, WaveBakeSec: e.WaveBakeSec, Ignores: protocol.ETAIgnores}
	if !e.At.IsZero() {
		out.At = ptr(e.At.UTC())
	}
	for _, g := range e.Groups {
		out.Groups = append(out.Groups, protocol.RolloutGroupPlan(g))
	}
	return out
}
