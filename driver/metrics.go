package driver

import (
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/metrics"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// lockAcquireBuckets are the upper bounds (seconds) of
// clusterrebootd_lock_acquire_seconds: from a prompt handover to hours of
// queueing behind a rolling reboot.
func lockAcquireBuckets() []float64 {
	return []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60, 300, 900, 1800, 3600, 7200}
}

// rebootDurationBuckets are the upper bounds (seconds) of
// clusterrebootd_reboot_duration_seconds: from a quick VM restart to a
// server that takes most of reboot_slot_ttl_sec's default (1800 s) or more.
func rebootDurationBuckets() []float64 {
	return []float64{30, 60, 120, 300, 600, 900, 1800, 3600, 7200}
}

// states are the values of clusterrebootd_state's label (docs/daemon.md).
func states() []string {
	return []string{policy.StateIdle, policy.StateNeedsReboot, policy.StateWaiting, policy.StateBlocked,
		policy.StateRebooting, policy.StatePostReboot}
}

// Metrics are the daemon's series (docs/daemon.md lists them).
type Metrics struct {
	Registry       *metrics.Registry
	Reboots        *metrics.Counter
	HealthChecks   *metrics.Counter
	LockAcquire    *metrics.Histogram
	Blocked        *metrics.Counter
	RebootRequired *metrics.Gauge
	LockHeld       *metrics.Gauge
	LockHolding    *metrics.Gauge
	LastCheck      *metrics.Gauge
	Build          *metrics.Gauge
	State          *metrics.Gauge
	RequiredSince  *metrics.Gauge
	RebootDuration *metrics.Histogram
	SlotExpired    *metrics.Counter
	PublishFailing *metrics.Gauge
	// RolloutHalted: clusterrebootd_rollout_halted, as the last
	// publication read the halt key.
	RolloutHalted *metrics.Gauge
	// SilenceFailures: clusterrebootd_silence_failures_total{op}.
	SilenceFailures *metrics.Counter
	NotifySent      *metrics.Counter
	NotifyFailed    *metrics.Counter
}

// NewMetrics registers the daemon's series in a new registry.
func NewMetrics(version string) *Metrics {
	r := metrics.NewRegistry()
	m := &Metrics{
		Registry:       r,
		Reboots:        r.NewCounter("clusterrebootd_reboots_total", "Coordinated reboots this daemon started (the reboot command ran)."),
		HealthChecks:   r.NewCounter("clusterrebootd_health_checks_total", "Health gate runs by the daemon, by result.", "status"),
		LockAcquire:    r.NewHistogram("clusterrebootd_lock_acquire_seconds", "Time from asking for the lock to holding it.", lockAcquireBuckets()),
		Blocked:        r.NewCounter("clusterrebootd_reboot_blocked_total", "Cycles that needed a reboot and were blocked, by reason.", "reason"),
		RebootRequired: r.NewGauge("clusterrebootd_reboot_required", "1 when the detectors say this node needs a reboot."),
		LockHeld:       r.NewGauge("clusterrebootd_lock_held", "1 while this node's cluster step queues for or holds the lock."),
		LockHolding:    r.NewGauge("clusterrebootd_lock_holding", "1 while this node's cluster step holds the lock (a seat), 0 while it only queues or runs no step."),
		LastCheck:      r.NewGauge("clusterrebootd_last_check_timestamp_seconds", "Unix time of the last detector check."),
		Build:          r.NewGauge("clusterrebootd_build_info", "Always 1; the version label says what runs.", "version"),
		State:          r.NewGauge("clusterrebootd_state", "1 for the node's current state (idle, needs_reboot, waiting, blocked, rebooting, post_reboot), 0 for the others.", "state"),
		RequiredSince:  r.NewGauge("clusterrebootd_reboot_required_since_timestamp_seconds", "Unix time since when the detectors have said, check after check, that this node needs a reboot; 0 when it does not."),
		RebootDuration: r.NewHistogram("clusterrebootd_reboot_duration_seconds", "Coordinated reboots from the reboot request to the completed post-reboot checks.", rebootDurationBuckets()),
		SlotExpired:    r.NewCounter("clusterrebootd_reboot_slot_expired_total", "Coordinated reboots completed after the node's reboot slot had expired (it took longer than reboot_slot_ttl_sec)."),
		PublishFailing: r.NewGauge("clusterrebootd_publish_failing", "1 while the last health-record publication to etcd failed."),
		RolloutHalted:  r.NewGauge("clusterrebootd_rollout_halted", "1 while the rollout is halted (its failure budget spent, docs/rollout.md), as this node's last publication read it; resume with clusterrebootd resume --reason."),
		NotifySent:     r.NewCounter("clusterrebootd_notifications_sent_total", "Notifications delivered by this node's cluster steps, by event (one per destination).", "event"),
		NotifyFailed:   r.NewCounter("clusterrebootd_notifications_failed_total", "Notifications that failed or timed out, by event (one per destination); the reboot never waits for them.", "event"),
	}
	m.HealthChecks.Touch("healthy")
	m.HealthChecks.Touch("unhealthy")
	m.Reboots.Touch()
	m.RebootRequired.Set(0)
	m.LockHeld.Set(0)
	m.LockHolding.Set(0)
	m.Build.Set(1, version)
	m.SetState(policy.StateIdle)
	m.RequiredSince.Set(0)
	m.SlotExpired.Touch()
	m.PublishFailing.Set(0)
	m.RolloutHalted.Set(0)
	m.SilenceFailures = newSilenceFailures(r)
	m.touchNotifyMetrics()
	return m
}

// SetState sets clusterrebootd_state to 1 for state and 0 for the others.
func (m *Metrics) SetState(state string) {
	for _, s := range states() {
		v := 0.0
		if s == state {
			v = 1
		}
		m.State.Set(v, s)
	}
}

// touchNotifyMetrics shows every event at 0 in both series.
func (m *Metrics) touchNotifyMetrics() {
	for _, e := range config.NotifyEvents() {
		m.NotifySent.Touch(e)
		m.NotifyFailed.Touch(e)
	}
}
