package policy

import "github.com/clusterrebootd/clusterrebootd/lib/config"

// Rules are the fleet's rules as one node is configured: every health
// record and every reboot slot carries its writer's, and the admission
// applies, rule by rule, the strictest among its own and those of the live
// records and slots (docs/rollout.md, "Whose rules").
type Rules struct {
	MaxHolders       config.Budget `json:"max_holders,omitzero"`
	MaxTotal         config.Budget `json:"max_total,omitzero"`
	MaxFailures      config.Budget `json:"max_failures,omitzero"`
	FailureWindowSec int           `json:"failure_window_sec,omitempty"`
	FailureScope     string        `json:"failure_scope,omitempty"`
	MinIntervalSec   int           `json:"min_interval_sec,omitempty"`
	MaxStartsPerHour int           `json:"max_starts_per_hour,omitempty"`
	WaveBakeSec      int           `json:"wave_bake_sec,omitempty"`
	WaveTimeoutSec   int           `json:"wave_timeout_sec,omitempty"`
}

// RulesOf is cfg's rules.
func RulesOf(cfg config.Config) Rules {
	r := cfg.Rollout
	return Rules{MaxHolders: cfg.MaxHolders, MaxTotal: cfg.MaxHoldersTotal, MaxFailures: r.MaxFailures,
		FailureWindowSec: r.FailureWindowSec, FailureScope: r.FailureScope, MinIntervalSec: r.MinIntervalSec,
		MaxStartsPerHour: r.MaxStartsPerHour, WaveBakeSec: r.WaveBakeSec, WaveTimeoutSec: r.WaveTimeoutSec}
}

// Effective is a rule set resolved to numbers for a scope: the group's and
// the fleet's node counts turn percentages into counts.
type Effective struct {
	// MaxHolders is the group's budget; MaxTotal the fleet's (0: none).
	MaxHolders, MaxTotal int
	// MaxFailures is the failure budget (0: off).
	MaxFailures      int
	FailureWindowSec int
	// FailureScope is config.ScopeFleet or config.ScopeGroup.
	FailureScope                     string
	MinIntervalSec, MaxStartsPerHour int
	WaveBakeSec, WaveTimeoutSec      int
}

// Resolve is r's numbers for a group of groupNodes and a fleet of
// fleetNodes; scopeNodes is what max_failures' percentage is of (the
// group's or the fleet's nodes, by the scope).
func (r Rules) Resolve(groupNodes, fleetNodes int) Effective {
	e := Effective{MaxHolders: r.MaxHolders.Of(groupNodes), FailureWindowSec: r.FailureWindowSec, FailureScope: r.FailureScope,
		MinIntervalSec: r.MinIntervalSec, MaxStartsPerHour: r.MaxStartsPerHour, WaveBakeSec: r.WaveBakeSec, WaveTimeoutSec: r.WaveTimeoutSec}
	if !r.MaxTotal.IsZero() {
		e.MaxTotal = r.MaxTotal.Of(fleetNodes)
	}
	if e.FailureScope == "" {
		e.FailureScope = config.ScopeFleet
	}
	if !r.MaxFailures.IsZero() {
		n := fleetNodes
		if e.FailureScope == config.ScopeGroup {
			n = groupNodes
		}
		e.MaxFailures = r.MaxFailures.Of(n)
	}
	return e
}

// Stricter is, rule by rule, the stricter of e and o (o from another
// node's record or slot): the smaller budget, the smaller failure budget
// that is not off, the longer window, interval, bake time and timeout, the
// smaller rate that is not off, the fleet scope over the group's. group
// says whether o's writer is of this node's group: only then do its
// group rules (max_holders, min_interval_sec) apply.
func (e Effective) Stricter(o Effective, group bool) Effective {
	if group {
		if o.MaxHolders > 0 && o.MaxHolders < e.MaxHolders {
			e.MaxHolders = o.MaxHolders
		}
		e.MinIntervalSec = max(e.MinIntervalSec, o.MinIntervalSec)
	}
	e.MaxTotal = smallestOn(e.MaxTotal, o.MaxTotal)
	e.MaxFailures = smallestOn(e.MaxFailures, o.MaxFailures)
	e.MaxStartsPerHour = smallestOn(e.MaxStartsPerHour, o.MaxStartsPerHour)
	e.FailureWindowSec = max(e.FailureWindowSec, o.FailureWindowSec)
	e.WaveBakeSec = max(e.WaveBakeSec, o.WaveBakeSec)
	e.WaveTimeoutSec = max(e.WaveTimeoutSec, o.WaveTimeoutSec)
	if o.FailureScope == config.ScopeFleet {
		e.FailureScope = config.ScopeFleet
	}
	return e
}

// smallestOn is the smaller of two limits where 0 means none.
func smallestOn(a, b int) int {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}
