package config

import (
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

func TestMonitorChecksValid(t *testing.T) {
	body := `gate:
  alerts:
    - url: http://am:9093
      match: ['severity=~"critical|warning"', 'instance=~"{{.Node}}:.*"']
      exclude: [alertname="Watchdog"]
    - url: https://user:pw@prom.example/prometheus
      source: prometheus
      include_pending: true
      timeout_sec: 5
      phases: [pre-lock, under-lock]
  promql:
    - url: http://[::1]:9090
      expr: sum(rate(errors_total{instance="{{.Node}}"}[5m]))
      max: 0.01
    - url: http://prom:9090
      expr: up == 0
      no_series: true
`
	cfg, err := load(t, body)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Gate.HasMonitorChecks() || len(cfg.Gate.Alerts) != 2 || *cfg.Gate.PromQL[0].Max != 0.01 {
		t.Fatalf("decoded %+v", cfg.Gate)
	}
}

func TestMonitorChecksErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"empty url", "gate:\n  alerts:\n    - source: alertmanager\n", "config.yaml:3: gate.alerts[0].url: is empty"},
		{"bad scheme", "gate:\n  alerts:\n    - url: am:9093\n", `gate.alerts[0].url: "am:9093" is not an http:// or https:// base URL`},
		{"password masked", "gate:\n  alerts:\n    - url: \"http://crd:s3cret@am:9093?x=1\"\n", `"http://crd:***@am:9093?x=1" is not`},
		{"bad port", "gate:\n  alerts:\n    - url: http://am:99999\n", `port "99999" is not 1-65535`},
		{"bad source", "gate:\n  alerts:\n    - {url: http://am:9093, source: grafana}\n", `gate.alerts[0].source: "grafana" is not alertmanager or prometheus`},
		{"pending on alertmanager", "gate:\n  alerts:\n    - {url: http://am:9093, include_pending: true}\n", "gate.alerts[0].include_pending: only a prometheus source"},
		{"bad matcher with line", "gate:\n  alerts:\n    - url: http://am:9093\n      match:\n        - severity=\"critical\"\n        - severity<3\n", "config.yaml:6: gate.alerts[0].match[1]: \"severity<3\": after the label name severity comes one of =, !=, =~ or !~"},
		{"bad regexp", "gate:\n  alerts:\n    - url: http://am:9093\n      exclude: ['a=~\"(\"']\n", "gate.alerts[0].exclude[0]: \"a=~\\\"(\\\"\": the regex does not compile"},
		{"unknown template field", "gate:\n  alerts:\n    - url: http://am:9093\n      match: ['instance=\"{{.Host}}\"']\n", "gate.alerts[0].match[0]: template \"instance=\\\"{{.Host}}\\\"\": {{.Host}}: unknown field .Host"},
		{"bad phase", "gate:\n  alerts:\n    - {url: http://am:9093, phases: [later]}\n", `gate.alerts[0].phases[0]: "later" is not pre-lock`},
		{"negative timeout", "gate:\n  alerts:\n    - {url: http://am:9093, timeout_sec: -1}\n", "gate.alerts[0].timeout_sec: -1 must not be negative"},
		{"promql without bounds", "gate:\n  promql:\n    - {url: http://p:9090, expr: up}\n", "config.yaml:3: gate.promql[0]: needs min, max or no_series"},
		{"promql bounds and no_series", "gate:\n  promql:\n    - {url: http://p:9090, expr: up, no_series: true, max: 1}\n", "gate.promql[0].no_series: goes without min and max"},
		{"promql min above max", "gate:\n  promql:\n    - {url: http://p:9090, expr: up, min: 2, max: 1}\n", "gate.promql[0].max: 1 is below min (2)"},
		{"promql not finite", "gate:\n  promql:\n    - {url: http://p:9090, expr: up, max: .inf}\n", "gate.promql[0].max: +Inf is not a finite number"},
		{"promql empty expr", "gate:\n  promql:\n    - {url: http://p:9090, max: 1}\n", "gate.promql[0].expr: is empty"},
		{"promql bad template", "gate:\n  promql:\n    - {url: http://p:9090, expr: 'up{i=\"{{.Nod}}\"}', max: 1}\n", "gate.promql[0].expr: {{.Nod}}: unknown field .Nod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.body)
			if err == nil {
				t.Fatalf("want an error containing %q", tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error prints the password: %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\n does not contain %q", err, tt.want)
			}
			if exitcode.From(err) != 2 {
				t.Errorf("exit code %d, want 2", exitcode.From(err))
			}
		})
	}
}
