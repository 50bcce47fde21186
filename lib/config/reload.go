package config

import "reflect"

// restartOnly lists the fields a SIGHUP cannot change in a running daemon:
// identity, where state lives, and the metrics listener. Every other field
// takes effect at the next cycle (the cluster steps run in a fresh child each
// time, so even etcd settings are picked up then). docs/configuration.md
// carries the same table.
var restartOnly = []struct {
	field string
	get   func(*Config) any
}{
	{"node_name", func(c *Config) any { return c.NodeName }},
	{"state_dir", func(c *Config) any { return c.StateDir }},
	{"run_dir", func(c *Config) any { return c.RunDir }},
	{"metrics.enabled", func(c *Config) any { return c.Metrics.Enabled }},
	{"metrics.listen", func(c *Config) any { return c.Metrics.Listen }},
}

// RestartOnlyFields names every restart-only field.
func RestartOnlyFields() []string {
	out := make([]string, len(restartOnly))
	for i, f := range restartOnly {
		out[i] = f.field
	}
	return out
}

// RestartOnlyChanges lists the restart-only fields whose value differs
// between old and new: a reload keeps the old value of those and warns.
func RestartOnlyChanges(old, new *Config) []string {
	var changed []string
	for _, f := range restartOnly {
		if !reflect.DeepEqual(f.get(old), f.get(new)) {
			changed = append(changed, f.field)
		}
	}
	return changed
}

// KeepRestartOnly copies the restart-only fields of running into next, so
// that a reload applies only what it can.
func KeepRestartOnly(running, next *Config) {
	next.NodeName = running.NodeName
	next.StateDir = running.StateDir
	next.RunDir = running.RunDir
	next.Metrics.Enabled = running.Metrics.Enabled
	next.Metrics.Listen = running.Metrics.Listen
}
