package testscripts

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/monitortest"
)

// monitoring is one script's servers.
type monitoring struct {
	am     *monitortest.Alertmanager
	prom   *monitortest.Prometheus
	target *monitortest.Target
	// stopProm stops Prometheus once (a second Stop would wait forever).
	stopProm func()
}

// monitors maps each running script to its servers (monitoring start).
var monitors sync.Map

// CmdMonitoring implements
//
//	monitoring start RULES      a real Alertmanager, a target, and a Prometheus that scrapes
//	                            the target with the rule file RULES and sends alerts to the
//	                            Alertmanager; sets $AM_URL and $PROM_URL
//	monitoring set NAME VALUE   the target's gauge NAME
//	monitoring wait-alert NAME [STATE]   until Alertmanager has alert NAME (active, suppressed)
//	monitoring wait-cleared NAME         until Prometheus has no pending or firing alert NAME
//	monitoring silence MATCHER...        silence in Alertmanager for an hour (name=value, name=~re)
//	monitoring stop-prometheus
//
// The servers stop when the script ends. Scripts start with
// `[!monitoring] skip`.
func CmdMonitoring(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: monitoring start RULES | set NAME VALUE | wait-alert NAME [STATE] | wait-cleared NAME | silence MATCHER... | stop-prometheus")
	}
	if args[0] == "start" {
		monitoringStart(ts, args[1:])
		return
	}
	v, ok := monitors.Load(ts)
	if !ok {
		ts.Fatalf("monitoring %s: run monitoring start first", args[0])
	}
	m := v.(*monitoring)
	switch args[0] {
	case "set":
		if len(args) != 3 {
			ts.Fatalf("usage: monitoring set NAME VALUE")
		}
		f, err := strconv.ParseFloat(args[2], 64)
		ts.Check(err)
		m.target.Set(args[1], f)
	case "wait-alert":
		if len(args) < 2 || len(args) > 3 {
			ts.Fatalf("usage: monitoring wait-alert NAME [STATE]")
		}
		state := "active"
		if len(args) == 3 {
			state = args[2]
		}
		ts.Check(waitAlert(m.am, args[1], state))
	case "silence":
		id, err := m.am.SilenceE(time.Hour, args[1:]...)
		ts.Check(err)
		ts.Logf("silence %s", id)
	case "wait-cleared":
		if len(args) != 2 {
			ts.Fatalf("usage: monitoring wait-cleared NAME")
		}
		ts.Check(waitCleared(m.prom, args[1]))
	case "stop-prometheus":
		m.stopProm()
	default:
		ts.Fatalf("monitoring: unknown subcommand %q", args[0])
	}
}

func monitoringStart(ts *testscript.TestScript, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: monitoring start RULES")
	}
	rules, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	dir := filepath.Join(ts.Getenv("WORK"), ".monitoring")
	ts.Check(os.MkdirAll(filepath.Join(dir, "am"), 0o755))
	ts.Check(os.MkdirAll(filepath.Join(dir, "prom"), 0o755))
	m := &monitoring{}
	m.am, err = monitortest.RunAlertmanager(filepath.Join(dir, "am"), monitortest.AlertmanagerOptions{})
	ts.Check(err)
	ts.Defer(m.am.Stop)
	m.target, err = monitortest.RunTarget()
	ts.Check(err)
	ts.Defer(m.target.Stop)
	m.prom, err = monitortest.RunPrometheus(filepath.Join(dir, "prom"), monitortest.PrometheusOptions{Rules: string(rules), ScrapeTargets: []string{m.target.Addr}, AlertmanagerURL: m.am.URL})
	ts.Check(err)
	m.stopProm = sync.OnceFunc(m.prom.Stop)
	ts.Defer(m.stopProm)
	monitors.Store(ts, m)
	ts.Defer(func() { monitors.Delete(ts) })
	ts.Setenv("AM_URL", m.am.URL)
	ts.Setenv("PROM_URL", m.prom.URL)
}

// waitAlert waits until Alertmanager has alert name in state.
func waitAlert(am *monitortest.Alertmanager, name, state string) error {
	deadline := time.Now().Add(monitortest.StartTimeout)
	var last []monitortest.Alert
	for time.Now().Before(deadline) {
		as, err := am.AlertsE()
		if err == nil {
			last = as
			for _, a := range as {
				if a.Labels["alertname"] == name && a.Status.State == state {
					return nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	var seen []string
	for _, a := range last {
		seen = append(seen, a.Labels["alertname"]+"/"+a.Status.State)
	}
	return fmt.Errorf("alert %s (%s) not in Alertmanager %s after %s; seen: %s", name, state, am.URL, monitortest.StartTimeout, strings.Join(seen, ", "))
}

// MonitoringAvailable is the [monitoring] condition: both servers are
// installed. A missing one is an error when CRD_TEST_MONITORING=1 (make
// test-monitoring), so that a machine without them cannot pass by skipping.
func MonitoringAvailable() (bool, error) {
	for _, b := range [][2]string{{monitortest.EnvAlertmanager, monitortest.DefaultAlertmanager}, {monitortest.EnvPrometheus, monitortest.DefaultPrometheus}} {
		if _, err := monitortest.Binary(b[0], b[1]); err != nil {
			if monitortest.Required() {
				return false, err
			}
			return false, nil
		}
	}
	return true, nil
}

// waitCleared waits until Prometheus lists no alert name (pending or firing).
func waitCleared(p *monitortest.Prometheus, name string) error {
	deadline := time.Now().Add(monitortest.StartTimeout)
	for time.Now().Before(deadline) {
		as, err := p.AlertsE()
		if err == nil && !slices.ContainsFunc(as, func(a monitortest.PromAlert) bool { return a.Labels["alertname"] == name }) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("alert %s still in Prometheus %s after %s", name, p.URL, monitortest.StartTimeout)
}
