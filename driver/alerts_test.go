package driver

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// The daemon's gate runs the alert checks through `crd-lock step alerts`
// only when some are configured, and fails closed when the child gives no
// answer.
func TestRealGateAlertsChild(t *testing.T) {
	script := filepath.Join(t.TempDir(), "ok")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	withAlerts := func() config.Config {
		cfg := config.Default()
		cfg.NodeName = "n1"
		cfg.HealthScript = script
		cfg.Gate.Alerts = []config.AlertCheck{{URL: "http://am:9093"}}
		return cfg
	}
	firing := `{"tool":"crd-lock","exit_code":3,"phase":"post-reboot","checks":[{"name":"alerts","passed":false,"reason":"1 matching alert(s) firing at http://am:9093 (alertmanager): NodeDown","url":"http://am:9093","blocking":["NodeDown"]}]}`
	quiet := `{"tool":"crd-lock","exit_code":0,"phase":"pre-lock","checks":[{"name":"alerts","passed":true,"reason":"no matching alert firing at http://am:9093 (alertmanager)"}]}`
	tests := []struct {
		name   string
		cfg    func() config.Config
		phase  string
		answer *answer
		calls  []string
		code   exitcode.Code
		reason string
	}{
		{"no alert checks: no child", func() config.Config { c := withAlerts(); c.Gate.Alerts = nil; return c }, gate.PhasePreLock, nil,
			nil, exitcode.OK, "health script " + script + " exited 0"},
		{"quiet: the child's verdict, then the script", withAlerts, gate.PhasePreLock, &answer{code: exitcode.OK, json: quiet},
			[]string{protocol.StepAlerts}, exitcode.OK, "no matching alert firing at http://am:9093 (alertmanager); health script " + script + " exited 0"},
		{"firing after the reboot blocks", withAlerts, gate.PhasePostReboot, &answer{code: exitcode.HealthBlocked, json: firing},
			[]string{protocol.StepAlerts}, exitcode.HealthBlocked, "1 matching alert(s) firing at http://am:9093 (alertmanager): NodeDown"},
		{"a child without an answer blocks", withAlerts, gate.PhasePreLock, &answer{code: exitcode.Internal, err: errors.New("driver: crd-lock step alerts was killed")},
			[]string{protocol.StepAlerts}, exitcode.HealthBlocked, "alert checks unknown, so not rebooting: crd-lock step alerts exited 70: driver: crd-lock step alerts was killed"},
		{"a config error of the child blocks", withAlerts, gate.PhasePreLock, &answer{code: exitcode.Config, json: `{"tool":"crd-lock","exit_code":2,"error":"config stdin:3: bad"}`},
			[]string{protocol.StepAlerts}, exitcode.HealthBlocked, "alert checks unknown, so not rebooting: crd-lock step alerts exited 2: config stdin:3: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child := &fakeChild{answers: map[string]answer{}}
			if tt.answer != nil {
				child.answers[protocol.StepAlerts] = *tt.answer
			}
			g := RealGate{Runner: proc.Exec{}, Child: child}
			r := g.Check(context.Background(), tt.cfg(), tt.phase, policy.Summary{})
			if exitcode.CodeOf(r.Err()) != tt.code || r.Reason != tt.reason {
				t.Errorf("gate = %v, %q; want %v, %q", r.Err(), r.Reason, tt.code, tt.reason)
			}
			if !slices.Equal(child.steps(), tt.calls) {
				t.Errorf("child steps %q, want %q", child.steps(), tt.calls)
			}
			for _, a := range child.args {
				if a != (protocol.AlertsArgs{Phase: tt.phase}) {
					t.Errorf("child args %+v", a)
				}
			}
			if strings.Contains(r.Reason, "\n") {
				t.Errorf("reason spans lines: %q", r.Reason)
			}
		})
	}
}

// The child gets gate.alerts and gate.promql intact through the request on
// its stdin: a bound of 0 stays 0, an unset bound stays unset.
func TestAlertsConfigRoundTrip(t *testing.T) {
	zero := 0.0
	cfg := config.Default()
	cfg.NodeName = "n1"
	cfg.Gate.Alerts = []config.AlertCheck{{URL: "http://u:pw@am:9093", Match: []string{`instance=~"{{.Node}}:.*"`}, Phases: []string{gate.PhasePostReboot}}}
	cfg.Gate.PromQL = []config.PromQLCheck{{URL: "http://prom:9090", Expr: "up", Max: &zero}}
	b, err := ExecChild{}.request(protocol.StepAlerts, protocol.AlertsArgs{Phase: gate.PhasePostReboot}, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	var req protocol.Request
	if err := json.Unmarshal(b, &req); err != nil || req.Config == nil {
		t.Fatalf("%v\n%s", err, b)
	}
	got := *req.Config
	if err := config.Validate(&got, "stdin", nil); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	a, q := got.Gate.Alerts[0], got.Gate.PromQL[0]
	if a.URL != "http://u:pw@am:9093" || a.Match[0] != `instance=~"{{.Node}}:.*"` || a.Phases[0] != gate.PhasePostReboot || q.Max == nil || *q.Max != 0 || q.Min != nil {
		t.Errorf("round trip: %+v %+v\n%s", a, q, b)
	}
}
