package alertgate

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/silence/matcher"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/monitortest"
)

// testRules fires CrdTestDown while the target's crd_test_down gauge is
// above 0.
const testRules = `groups:
  - name: crd
    rules:
      - alert: CrdTestDown
        expr: crd_test_down > 0
        labels:
          severity: critical
`

// checkOne runs one check and returns its only result.
func checkOne(t *testing.T, c Checker, phase string) gate.CheckResult {
	t.Helper()
	res, err := c.Check(context.Background(), phase)
	if err != nil || len(res) != 1 {
		t.Fatalf("Check = %+v, %v", res, err)
	}
	return res[0]
}

// Against Debian's real Prometheus and Alertmanager: Prometheus scrapes a
// target with an alerting rule and routes the alert to Alertmanager.
func TestRealServers(t *testing.T) {
	am := monitortest.StartAlertmanager(t, monitortest.AlertmanagerOptions{})
	tg := monitortest.NewTarget(t)
	tg.Set("crd_test_down", 0)
	// Run, not Start: the test stops it itself, once (a second Stop waits forever).
	prom, err := monitortest.RunPrometheus(t.TempDir(), monitortest.PrometheusOptions{Rules: testRules, ScrapeTargets: []string{tg.Addr}, AlertmanagerURL: am.URL})
	if err != nil {
		if !monitortest.Required() && strings.Contains(err.Error(), "not found") {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	stopProm := sync.OnceFunc(prom.Stop)
	t.Cleanup(stopProm)
	zero, one := 0.0, 1.0
	fromAM := Checker{Data: matcher.Data{Node: "node-a"}, Alerts: []config.AlertCheck{{URL: am.URL, Match: []string{`severity="critical"`}}}}
	fromProm := Checker{Data: matcher.Data{Node: "node-a"}, Alerts: []config.AlertCheck{{URL: prom.URL, Source: config.SourcePrometheus, Match: []string{`alertname="CrdTestDown"`}}}}
	bounded := Checker{Data: matcher.Data{Node: "node-a"}, PromQL: []config.PromQLCheck{{URL: prom.URL, Expr: "max(crd_test_down)", Min: &zero, Max: &zero}}}

	// Quiet: every check passes once the gauge has been scraped.
	deadline := time.Now().Add(monitortest.StartTimeout)
	for r := checkOne(t, bounded, gate.PhasePreLock); !r.Passed; r = checkOne(t, bounded, gate.PhasePreLock) {
		if time.Now().After(deadline) {
			t.Fatalf("PromQL never within bounds: %s", r.Reason)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := checkOne(t, fromAM, gate.PhasePreLock); !r.Passed {
		t.Fatalf("quiet Alertmanager blocks: %s", r.Reason)
	}

	// The gauge rises: the PromQL value leaves its bounds, the alert fires
	// in Prometheus and reaches Alertmanager; every check blocks, naming it.
	tg.Set("crd_test_down", 1)
	prom.WaitAlert(t, "CrdTestDown", "firing")
	am.WaitAlert(t, "CrdTestDown", "active")
	if r := checkOne(t, fromAM, gate.PhaseUnderLock); r.Passed || !strings.Contains(r.Reason, "CrdTestDown{") || !strings.Contains(r.Reason, am.URL) {
		t.Errorf("firing alert in Alertmanager: %+v", r)
	}
	if r := checkOne(t, fromProm, gate.PhasePostReboot); r.Passed || !strings.Contains(r.Reason, "CrdTestDown{") || !strings.Contains(r.Reason, "(prometheus)") {
		t.Errorf("firing alert in Prometheus: %+v", r)
	}
	if r := checkOne(t, bounded, gate.PhasePreLock); r.Passed || !strings.Contains(r.Reason, "outside [0, 0]: {} = 1") {
		t.Errorf("PromQL out of bounds: %+v", r)
	}
	if r := checkOne(t, Checker{PromQL: []config.PromQLCheck{{URL: prom.URL, Expr: "max(crd_test_down)", Max: &one}}}, gate.PhasePreLock); !r.Passed {
		t.Errorf("PromQL within [-Inf, 1]: %+v", r)
	}
	if r := checkOne(t, Checker{PromQL: []config.PromQLCheck{{URL: prom.URL, Expr: "max(", Max: &one}}}, gate.PhasePreLock); r.Passed || !strings.Contains(r.Reason, "bad_data") {
		t.Errorf("PromQL syntax error: %+v", r)
	}

	// A silence in Alertmanager: the alert no longer blocks there.
	am.Silence(t, "alertname=CrdTestDown")
	am.WaitAlert(t, "CrdTestDown", "suppressed")
	if r := checkOne(t, fromAM, gate.PhasePreLock); !r.Passed {
		t.Errorf("a silenced alert blocks: %+v", r)
	}

	// Prometheus down: its checks block, naming its URL.
	stopProm()
	for _, c := range []Checker{fromProm, bounded} {
		if r := checkOne(t, c, gate.PhasePreLock); r.Passed || !strings.Contains(r.Reason, "at "+prom.URL+" unknown, so not rebooting") {
			t.Errorf("Prometheus down: %+v", r)
		}
	}
}
