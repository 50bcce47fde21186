package driver

import (
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// countNotifications adds a step's notifications to
// clusterrebootd_notifications_{sent,failed}_total.
func (d *Driver) countNotifications(n *protocol.Notifications) {
	if d.metrics == nil || n == nil {
		return
	}
	for _, s := range n.Sent {
		d.metrics.NotifySent.Inc(s.Event)
	}
	for _, f := range n.Failed {
		d.metrics.NotifyFailed.Inc(f.Event)
	}
}

// blockedEpisode is since when this node is blocked (or back from its
// reboot but failing the post-reboot checks, keeping its slot) without a
// break, and the reason now; zero when it is neither. The publish step gets it and
// sends node_blocked or reboot_loop (the daemon sends nothing itself).
func (d *Driver) blockedEpisode(st Status, now time.Time) (time.Time, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st.State != policy.StateBlocked && st.State != policy.StatePostReboot {
		d.blockedSince = time.Time{}
		return time.Time{}, ""
	}
	if d.blockedSince.IsZero() {
		d.blockedSince = now
	}
	return d.blockedSince, st.Reason
}
