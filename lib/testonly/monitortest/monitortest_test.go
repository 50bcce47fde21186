package monitortest

import (
	"testing"
	"time"
)

// TestAlertReachesAlertmanager runs the chain the alert gate depends on:
// a target's gauge makes a Prometheus rule fire, Prometheus sends the alert
// to Alertmanager, and a silence there suppresses it.
func TestAlertReachesAlertmanager(t *testing.T) {
	am := StartAlertmanager(t, AlertmanagerOptions{})
	tg := NewTarget(t)
	tg.Set("crd_test_broken", 0)
	p := StartPrometheus(t, PrometheusOptions{
		Rules: `groups:
  - name: test
    rules:
      - alert: TestBroken
        expr: crd_test_broken > 0
        labels: {severity: critical}
`,
		ScrapeTargets:   []string{tg.Addr},
		AlertmanagerURL: am.URL,
	})
	tg.Set("crd_test_broken", 1)
	p.WaitAlert(t, "TestBroken", "firing")
	a := am.WaitAlert(t, "TestBroken", "active")
	if a.Labels["severity"] != "critical" || a.Labels["instance"] != tg.Addr {
		t.Fatalf("alert labels = %v, want severity=critical instance=%s", a.Labels, tg.Addr)
	}
	id := am.Silence(t, "alertname=TestBroken")
	if id == "" {
		t.Fatal("silence: empty id")
	}
	am.WaitAlert(t, "TestBroken", "suppressed")
	ss := am.Silences(t)
	if len(ss) != 1 || ss[0].ID != id || ss[0].Status.State != "active" {
		t.Fatalf("silences = %+v, want one active %s", ss, id)
	}
}

// TestPostAlert pushes an alert straight to Alertmanager, as tests that
// need no Prometheus do.
func TestPostAlert(t *testing.T) {
	am := StartAlertmanager(t, AlertmanagerOptions{})
	am.PostAlert(t, map[string]string{"alertname": "Pushed", "instance": "node-1:9100"}, nil)
	am.WaitAlert(t, "Pushed", "active")
	if _, err := am.SilenceE(time.Minute, "instance=~node-1(:[0-9]+)?"); err != nil {
		t.Fatal(err)
	}
	am.WaitAlert(t, "Pushed", "suppressed")
}

func TestBinaryMissing(t *testing.T) {
	t.Setenv(EnvAlertmanager, "/nonexistent/alertmanager")
	if _, err := RunAlertmanager(t.TempDir(), AlertmanagerOptions{}); err == nil {
		t.Fatal("RunAlertmanager with a missing binary: no error")
	}
}

func TestStopTwice(t *testing.T) {
	am := StartAlertmanager(t, AlertmanagerOptions{})
	am.Stop()
	am.Stop() // and once more from t.Cleanup: none of them may hang
	if am.Running() {
		t.Fatal("running after Stop")
	}
}
