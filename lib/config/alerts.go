package config

import (
	"fmt"
	"math"
	"strings"

	"github.com/clusterrebootd/clusterrebootd/lib/silence/matcher"
)

// Sources of an alert check.
const (
	SourceAlertmanager = "alertmanager"
	SourcePrometheus   = "prometheus"
)

// DefaultMonitorTimeoutSec bounds an alert or PromQL check without timeout_sec.
const DefaultMonitorTimeoutSec = 10

// AlertCheck is one entry of gate.alerts: no firing alert of Source at URL
// may match.
type AlertCheck struct {
	// URL is the base URL of Alertmanager or Prometheus, e.g.
	// http://alertmanager:9093 (user:password@ allowed; never printed).
	URL string `yaml:"url" json:"url"`
	// Source is alertmanager (default) or prometheus.
	Source string `yaml:"source" json:"source"`
	// Match selects the alerts that block (all must match; none: every alert).
	Match []string `yaml:"match" json:"match"`
	// Exclude drops alerts any of which matches (e.g. alertname="Watchdog").
	Exclude []string `yaml:"exclude" json:"exclude"`
	// IncludePending also blocks on Prometheus alerts still pending.
	IncludePending bool `yaml:"include_pending" json:"include_pending"`
	// TimeoutSec bounds the request (0: DefaultMonitorTimeoutSec).
	TimeoutSec int `yaml:"timeout_sec" json:"timeout_sec"`
	// Phases the check runs in (none: all three).
	Phases []string `yaml:"phases" json:"phases"`
}

// PromQLCheck is one entry of gate.promql: Expr, evaluated by the
// Prometheus at URL, returns no series (NoSeries) or only values within
// [Min, Max].
type PromQLCheck struct {
	URL        string   `yaml:"url" json:"url"`
	Expr       string   `yaml:"expr" json:"expr"`
	Min        *float64 `yaml:"min" json:"min"`
	Max        *float64 `yaml:"max" json:"max"`
	NoSeries   bool     `yaml:"no_series" json:"no_series"`
	TimeoutSec int      `yaml:"timeout_sec" json:"timeout_sec"`
	Phases     []string `yaml:"phases" json:"phases"`
}

// MatcherData is what the templates of gate.alerts matchers and gate.promql
// expressions see: {{.Node}}, {{.Group}}, {{.Lock}} (as for silences).
func MatcherData(c Config) matcher.Data {
	return matcher.Data{Node: c.NodeName, Group: c.Group, Lock: strings.TrimSuffix(c.LockKey, "/")}
}

// HasMonitorChecks reports whether the gate has an alert or PromQL check.
func (g GateChecks) HasMonitorChecks() bool { return len(g.Alerts) > 0 || len(g.PromQL) > 0 }

// MonitorTimeoutSec is a timeout_sec, or its default, in seconds.
func MonitorTimeoutSec(n int) int {
	if n <= 0 {
		return DefaultMonitorTimeoutSec
	}
	return n
}

// InPhase reports whether a check with phases runs in phase.
func InPhase(phases []string, phase string) bool {
	if len(phases) == 0 {
		return true
	}
	for _, p := range phases {
		if p == phase {
			return true
		}
	}
	return false
}

// monitorChecks validates gate.alerts and gate.promql: URLs, sources,
// matchers (as templates of the node name), bounds, timeouts and phases.
func (v *validator) monitorChecks() {
	g := v.cfg.Gate
	data := MatcherData(*v.cfg)
	if data.Node == "" {
		data.Node = "node"
	}
	for i, a := range g.Alerts {
		f := fmt.Sprintf("gate.alerts[%d]", i)
		v.monitorURL(f+".url", a.URL)
		switch a.Source {
		case "", SourceAlertmanager:
			if a.IncludePending {
				v.bad(f+".include_pending", "only a prometheus source has pending alerts; remove it or set source: prometheus")
			}
		case SourcePrometheus:
		default:
			v.bad(f+".source", "%q is not alertmanager or prometheus", a.Source)
		}
		for j, m := range a.Match {
			if _, err := matcher.RenderOne(m, data); err != nil {
				v.bad(fmt.Sprintf("%s.match[%d]", f, j), "%v", err)
			}
		}
		for j, m := range a.Exclude {
			if _, err := matcher.RenderOne(m, data); err != nil {
				v.bad(fmt.Sprintf("%s.exclude[%d]", f, j), "%v", err)
			}
		}
		v.monitorCommon(f, a.TimeoutSec, a.Phases)
	}
	for i, q := range g.PromQL {
		f := fmt.Sprintf("gate.promql[%d]", i)
		v.monitorURL(f+".url", q.URL)
		if strings.TrimSpace(q.Expr) == "" {
			v.bad(f+".expr", "is empty; give a PromQL expression, e.g. sum(ALERTS{alertstate=\"firing\"})")
		} else if _, err := matcher.Expand(q.Expr, data); err != nil {
			v.bad(f+".expr", "%v", err)
		}
		bounds := q.Min != nil || q.Max != nil
		switch {
		case q.NoSeries && bounds:
			v.bad(f+".no_series", "goes without min and max: either no series may be returned, or every value must lie within the bounds")
		case !q.NoSeries && !bounds:
			v.bad(f, "needs min, max or no_series: true; say what result allows a reboot")
		}
		for _, b := range []struct {
			name string
			val  *float64
		}{{"min", q.Min}, {"max", q.Max}} {
			if b.val != nil && (math.IsNaN(*b.val) || math.IsInf(*b.val, 0)) {
				v.bad(f+"."+b.name, "%v is not a finite number", *b.val)
			}
		}
		if q.Min != nil && q.Max != nil && *q.Min > *q.Max {
			v.bad(f+".max", "%v is below min (%v)", *q.Max, *q.Min)
		}
		v.monitorCommon(f, q.TimeoutSec, q.Phases)
	}
}

func (v *validator) monitorURL(field, u string) {
	if u == "" {
		v.bad(field, "is empty; give the base URL, e.g. http://alertmanager:9093 or http://prometheus:9090")
		return
	}
	if err := checkHTTPURL(u, false); err != nil {
		v.bad(field, "%q is not an http:// or https:// base URL: %v", RedactURL(u), err)
	}
}

func (v *validator) monitorCommon(field string, timeoutSec int, phases []string) {
	if timeoutSec < 0 {
		v.bad(field+".timeout_sec", "%d must not be negative (0: %d s)", timeoutSec, DefaultMonitorTimeoutSec)
	} else if timeoutSec > 300 {
		v.bad(field+".timeout_sec", "%d is above 300: a gate check must answer within minutes", timeoutSec)
	}
	for i, p := range phases {
		if p != "pre-lock" && p != "under-lock" && p != "post-reboot" {
			v.bad(fmt.Sprintf("%s.phases[%d]", field, i), "%q is not pre-lock, under-lock or post-reboot", p)
		}
	}
}
