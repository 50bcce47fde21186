package clusterrebootd

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// rolloutText is status's view of the rollout's progress: the nodes per
// wave and group, and the estimate of its end with its inputs
// (docs/rollout.md, "Seeing the rollout").
func rolloutText(w io.Writer, ro *protocol.RolloutStatus, view *policy.View) {
	report.Line(w, "progress", "nodes per wave and group (need reboot includes waiting; down: a reboot slot held; done: rebooted within the failure window)")
	fmt.Fprintf(w, "  %-5s %-20s %6s %12s %8s %5s %5s %7s\n", "WAVE", "GROUP", "NODES", "NEED REBOOT", "WAITING", "DOWN", "DONE", "FAILED")
	for _, g := range ro.Progress {
		fmt.Fprintf(w, "  %-5d %-20s %6d %12d %8d %5d %5d %7d\n", g.Wave, groupLabel(g.Group), g.Nodes, g.NeedReboot, g.Waiting, g.Down, g.Done, g.Failed)
	}
	e := ro.ETA
	end := "unknown: " + report.Field(e.Unknown)
	if e.At != nil {
		end = "about " + e.At.UTC().Format(time.RFC3339)
		if view != nil && !view.ReadAt.IsZero() {
			end += fmt.Sprintf(" (in %s)", roughly(e.At.Sub(view.ReadAt)))
		}
		if e.Remaining == 0 {
			end = "now: no node needs a reboot"
		}
	}
	left := fmt.Sprintf("%d reboot(s) left, %d of them down now", e.Remaining, e.Down)
	if e.Held > 0 {
		left += fmt.Sprintf("; %d held node(s) left out until released", e.Held)
	}
	report.Line(w, "estimated end", end+"; "+left)
	if e.Remaining == 0 {
		return
	}
	median := "no reboot measured yet"
	if e.Samples > 0 {
		median = fmt.Sprintf("median reboot %s of %d completed within the failure window", roughly(time.Duration(e.MedianRebootMS)*time.Millisecond), e.Samples)
	}
	parts := []string{median}
	for _, g := range e.Groups {
		p := fmt.Sprintf("%s: %d left, max_holders %d", groupLabel(g.Group), g.Remaining, g.MaxHolders)
		if g.MinIntervalSec > 0 {
			p += fmt.Sprintf(", min_interval_sec %d", g.MinIntervalSec)
		}
		parts = append(parts, p)
	}
	parts = append(parts, fmt.Sprintf("max_holders_total %s, max_starts_per_hour %s, wave_bake_sec %d", orNone(e.MaxTotal), orNone(e.MaxStartsPerHour), e.WaveBakeSec))
	report.Line(w, "  from", strings.Join(parts, "; "))
	report.Line(w, "  ignores", e.Ignores)
}

// groupLabel names a group for text output ("" is the ungrouped fleet).
func groupLabel(g string) string {
	if g == "" {
		return "(ungrouped)"
	}
	return report.Field(g)
}

func orNone(n int) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n)
}

// roughly is d to the second, or to the millisecond below a second.
func roughly(d time.Duration) time.Duration {
	if d < time.Second && d > -time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}
