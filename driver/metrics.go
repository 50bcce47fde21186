package driver

import "github.com/clusterrebootd/clusterrebootd/lib/metrics"

// lockAcquireBuckets are the upper bounds (seconds) of
// clusterrebootd_lock_acquire_seconds: from a prompt handover to hours of
// queueing behind a rolling reboot.
func lockAcquireBuckets() []float64 {
	return []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60, 300, 900, 1800, 3600, 7200}
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
	LastCheck      *metrics.Gauge
	Build          *metrics.Gauge
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
		LastCheck:      r.NewGauge("clusterrebootd_last_check_timestamp_seconds", "Unix time of the last detector check."),
		Build:          r.NewGauge("clusterrebootd_build_info", "Always 1; the version label says what runs.", "version"),
	}
	m.HealthChecks.Touch("healthy")
	m.HealthChecks.Touch("unhealthy")
	m.Reboots.Touch()
	m.RebootRequired.Set(0)
	m.LockHeld.Set(0)
	m.Build.Set(1, version)
	return m
}
