package driver

import (
	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/metrics"
)

// newSilenceFailures registers clusterrebootd_silence_failures_total.
func newSilenceFailures(r *metrics.Registry) *metrics.Counter {
	c := r.NewCounter("clusterrebootd_silence_failures_total",
		"Alertmanager silences of this node's reboots that could not be created (or extended) or expired, by op.", "op")
	c.Touch(protocol.SilenceOpCreate)
	c.Touch(protocol.SilenceOpExpire)
	return c
}

// countSilences adds a step's silence failures to the metric.
func (d *Driver) countSilences(r *protocol.SilenceReport) {
	if d.metrics == nil || r == nil {
		return
	}
	d.metrics.SilenceFailures.Add(float64(r.CreateFailures), protocol.SilenceOpCreate)
	d.metrics.SilenceFailures.Add(float64(r.ExpireFailures), protocol.SilenceOpExpire)
}
