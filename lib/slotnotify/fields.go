package slotnotify

import (
	"fmt"
	"strconv"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/notifications"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// Completed is reboot_completed of a node back from its reboot at now: the
// fencing token and slot from the reboot marker (the daemon writes them in
// its extra fields), else from the slot claim (the pipeline's, whose marker
// crd-reboot writes without them); Since and Duration from the marker's
// request, else from when the slot was taken.
func Completed(m reboot.Marker, hasMarker bool, cl slot.Claim, hasClaim bool, now time.Time) notifications.Fields {
	f := notifications.Fields{Event: config.NotifyRebootCompleted}
	var since time.Time
	if hasClaim {
		f.FencingToken, f.Slot = cl.FencingToken, cl.Key
		since, _ = time.Parse(time.RFC3339Nano, cl.Since)
	}
	if hasMarker {
		if token, err := strconv.ParseInt(m.Extra["fencing_token"], 10, 64); err == nil {
			f.FencingToken = token
		}
		if k := m.Extra["slot_key"]; k != "" {
			f.Slot = k
		}
		if !m.RequestedAt.IsZero() {
			since = m.RequestedAt
		}
	}
	if !since.IsZero() {
		f.Since = notifications.Stamp(since)
		f.SetDuration(now.Sub(since))
	}
	return f
}

// ExpiredOnReturn is slot_expired sent by the node itself when it came
// back after its slot (claim cl) had expired.
func ExpiredOnReturn(cl slot.Claim, token int64, ttlSec int) notifications.Fields {
	return notifications.Fields{Event: config.NotifySlotExpired, FencingToken: token, Slot: cl.Key, Since: SinceOf(cl.Since),
		Detail: fmt.Sprintf("the node came back after its slot had expired (reboot_slot_ttl_sec %d): other nodes may have rebooted meanwhile", ttlSec)}
}

// SinceOf shortens a claim's RFC 3339 time with fractions to seconds.
func SinceOf(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return notifications.Stamp(t)
}
