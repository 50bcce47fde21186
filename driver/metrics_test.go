package driver

import (
	"context"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// clusterrebootd_reboot_required_since_timestamp_seconds keeps the time of
// the first check of an unbroken run of "needed" and is 0 otherwise.
func TestRequiredSince(t *testing.T) {
	w := newWorld(t)
	w.windows.setOpen(false) // every cycle stops at step 3
	d := newDriver(t, w, testConfig(w), nil)
	steps := []struct {
		name     string
		after    time.Duration
		required bool
		want     time.Time // zero: 0
	}{
		{"first needed", 0, true, testNow},
		{"still needed an hour later", time.Hour, true, testNow},
		{"no longer needed", 2 * time.Hour, false, time.Time{}},
		{"needed again", 3 * time.Hour, true, testNow.Add(3 * time.Hour)},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			w.now = testNow.Add(s.after)
			w.detect.set(s.required)
			d.RunOnce(context.Background(), Mode{})
			want := 0.0
			if !s.want.IsZero() {
				want = float64(s.want.Unix())
			}
			if got := d.metrics.RequiredSince.Value(); got != want {
				t.Errorf("since = %v, want %v", got, want)
			}
		})
	}
}

// A completed coordinated reboot is observed in
// clusterrebootd_reboot_duration_seconds; one whose slot was gone when it
// completed (complete freed nothing) counts in
// clusterrebootd_reboot_slot_expired_total.
func TestRebootDurationAndSlotExpired(t *testing.T) {
	tests := []struct {
		name        string
		completeRes string
		wantExpired float64
	}{
		{"slot freed", `{"exit_code":0,"freed":true}`, 0},
		{"slot had expired", `{"exit_code":0,"freed":false}`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			writeMarker(t, w, "boot-1", testNow.Add(-7*time.Minute))
			w.detect.required = false
			w.child.answers[protocol.StepComplete] = answer{json: tt.completeRes}
			d := newDriver(t, w, testConfig(w), nil)
			d.RunOnce(context.Background(), Mode{})
			if n := d.metrics.RebootDuration.Count(); n != 1 {
				t.Fatalf("%d reboot durations observed, want 1", n)
			}
			if got := d.metrics.SlotExpired.Value(); got != tt.wantExpired {
				t.Errorf("slot expired = %v, want %v", got, tt.wantExpired)
			}
		})
	}
}

// clusterrebootd_state follows the status at each metrics write: one state
// is 1, the others 0.
func TestStateGauge(t *testing.T) {
	w := newWorld(t)
	cfg := testConfig(w)
	cfg.Metrics = config.Metrics{}
	d := newDriver(t, w, cfg, nil)
	dm := &Daemon{Driver: d, Metrics: d.metrics}
	for _, state := range states() {
		t.Run(state, func(t *testing.T) {
			d.setStatus(Status{State: state})
			dm.writeMetrics()
			for _, s := range states() {
				want := 0.0
				if s == state {
					want = 1
				}
				if got := d.metrics.State.Value(s); got != want {
					t.Errorf("state %s = %v, want %v", s, got, want)
				}
			}
		})
	}
	if len(states()) != 6 || states()[0] != policy.StateIdle {
		t.Errorf("states %v", states())
	}
}

// A child's silence failures become clusterrebootd_silence_failures_total.
func TestCountSilences(t *testing.T) {
	d := &Driver{metrics: NewMetrics("test")}
	d.countSilences(nil)
	d.countSilences(&protocol.SilenceReport{CreateFailures: 2})
	d.countSilences(&protocol.SilenceReport{ExpireFailures: 1, Expired: 3})
	if got := d.metrics.SilenceFailures.Value(protocol.SilenceOpCreate); got != 2 {
		t.Errorf("create failures = %v, want 2", got)
	}
	if got := d.metrics.SilenceFailures.Value(protocol.SilenceOpExpire); got != 1 {
		t.Errorf("expire failures = %v, want 1", got)
	}
}
