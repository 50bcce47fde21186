package cluster

import (
	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// progressOf and etaOf turn lib/slot's progress and estimate into the
// protocol's.
func progressOf(gs []slot.GroupProgress) []driver.RolloutProgress {
	out := make([]driver.RolloutProgress, 0, len(gs))
	for _, g := range gs {
		out = append(out, driver.RolloutProgress(g))
	}
	return out
}

func etaOf(e slot.Estimate) driver.RolloutETA {
	out := driver.RolloutETA{Unknown: e.Unknown, Remaining: e.Remaining, Down: e.Down, Held: e.Held,
		MedianRebootMS: e.Reboot.Milliseconds(), Samples: e.Samples, Groups: []driver.RolloutGroupPlan{},
		MaxTotal: e.MaxTotal, MaxStartsPerHour: e.MaxStartsPerHour, WaveBakeSec: e.WaveBakeSec, Ignores: driver.ETAIgnores}
	if !e.At.IsZero() {
		out.At = ptr(e.At.UTC())
	}
	for _, g := range e.Groups {
		out.Groups = append(out.Groups, driver.RolloutGroupPlan(g))
	}
	return out
}
