package driver

import "github.com/clusterrebootd/clusterrebootd/lib/metrics"

// SilenceReport is what a cluster step did with this node's Alertmanager
// silences (docs/silences.md): the cycle creates them when it takes the
// reboot slot, complete expires them after the boot.
type SilenceReport struct {
	// IDs are the silences this node holds after the step, one per
	// Alertmanager that answered.
	IDs []string `json:"ids,omitempty"`
	// Expired counts the silences complete expired.
	Expired int `json:"expired,omitempty"`
	// CreateFailures and ExpireFailures count the Alertmanagers that could
	// not create (or extend) and expire the silence; Errors says why, one
	// line each, passwords masked.
	CreateFailures int      `json:"create_failures,omitempty"`
	ExpireFailures int      `json:"expire_failures,omitempty"`
	Errors         []string `json:"errors,omitempty"`
}

// Silence operations, the op label of clusterrebootd_silence_failures_total.
const (
	SilenceOpCreate = "create"
	SilenceOpExpire = "expire"
)

// newSilenceFailures registers clusterrebootd_silence_failures_total.
func newSilenceFailures(r *metrics.Registry) *metrics.Counter {
	c := r.NewCounter("clusterrebootd_silence_failures_total",
		"Alertmanager silences of this node's reboots that could not be created (or extended) or expired, by op.", "op")
	c.Touch(SilenceOpCreate)
	c.Touch(SilenceOpExpire)
	return c
}

// countSilences adds a step's silence failures to the metric.
func (d *Driver) countSilences(r *SilenceReport) {
	if d.metrics == nil || r == nil {
		return
	}
	d.metrics.SilenceFailures.Add(float64(r.CreateFailures), SilenceOpCreate)
	d.metrics.SilenceFailures.Add(float64(r.ExpireFailures), SilenceOpExpire)
}
