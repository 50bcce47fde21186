package cluster

import (
	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// progressOf is the progress as the result carries it: a list, never
// null. etaOf is lib/slot's estimate as the result carries it (a time or
// null, milliseconds, what it ignores).
func progressOf(gs []slotinfo.GroupProgress) []slotinfo.GroupProgress {
	return append(make([]slotinfo.GroupProgress, 0, len(gs)), gs...)
}

func etaOf(e slot.Estimate) protocol.RolloutETA {
	out := protocol.RolloutETA{Unknown: e.Unknown, Remaining: e.Remaining, Down: e.Down, Held: e.Held,
		MedianRebootMS: e.Reboot.Milliseconds(), Samples: e.Samples, Groups: append([]slotinfo.GroupPlan{}, e.Groups...),
		MaxTotal: e.MaxTotal, MaxStartsPerHour: e.MaxStartsPerHour, WaveBakeSec: e.WaveBakeSec, Ignores: protocol.ETAIgnores}
	if !e.At.IsZero() {
		out.At = ptr(e.At.UTC())
	}
	return out
}
