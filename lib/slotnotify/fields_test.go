package slotnotify

import (
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// reboot_completed's token, slot and duration: the daemon's marker names
// them; the pipeline's (crd-reboot's) marker gives only the request time,
// the claim the rest; without a marker the claim's time counts.
func TestCompleted(t *testing.T) {
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	claim := slot.Claim{Key: "/c/rebooting/n1", Lease: "1f", Since: now.Add(-5 * time.Minute).Format(time.RFC3339Nano), FencingToken: 7}
	daemonMarker := reboot.Marker{RequestedAt: now.Add(-192 * time.Second), Extra: map[string]string{"fencing_token": "42", "slot_key": "/c/rebooting/x"}}
	pipeMarker := reboot.Marker{RequestedAt: now.Add(-100 * time.Second)}
	for _, tc := range []struct {
		name              string
		m                 reboot.Marker
		hasMarker, hasCl  bool
		token             int64
		slotKey, duration string
		since             time.Time
	}{
		{"daemon: the marker", daemonMarker, true, true, 42, "/c/rebooting/x", "3m12s", daemonMarker.RequestedAt},
		{"pipeline with crd-reboot: the claim and the marker's request", pipeMarker, true, true, 7, "/c/rebooting/n1", "1m40s", pipeMarker.RequestedAt},
		{"pipeline without a marker: the claim", reboot.Marker{}, false, true, 7, "/c/rebooting/n1", "5m0s", now.Add(-5 * time.Minute)},
		{"neither", reboot.Marker{}, false, false, 0, "", "", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Completed(tc.m, tc.hasMarker, claim, tc.hasCl, now)
			wantSince := ""
			if !tc.since.IsZero() {
				wantSince = tc.since.Format(time.RFC3339)
			}
			if f.Event != config.NotifyRebootCompleted || f.FencingToken != tc.token || f.Slot != tc.slotKey || f.Duration != tc.duration || f.Since != wantSince {
				t.Errorf("got %+v", f)
			}
		})
	}
}

func TestExpiredOnReturn(t *testing.T) {
	cl := slot.Claim{Key: "/c/rebooting/n1", Since: "2026-12-01T02:03:04.123456789Z"}
	f := ExpiredOnReturn(cl, 9, 1800)
	if f.Event != config.NotifySlotExpired || f.FencingToken != 9 || f.Slot != cl.Key || f.Since != "2026-12-01T02:03:04Z" ||
		f.Detail != "the node came back after its slot had expired (reboot_slot_ttl_sec 1800): other nodes may have rebooted meanwhile" {
		t.Errorf("got %+v", f)
	}
	if OnceKey("/c/", f.Event, OnceID("n1", "1f")) != "/c/notified/slot_expired/n1-1f" {
		t.Error(OnceKey("/c/", f.Event, OnceID("n1", "1f")))
	}
}
