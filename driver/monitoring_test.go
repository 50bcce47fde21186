package driver

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The dashboard and the alerting rules shipped under /usr/share/clusterrebootd
// (packaging/monitoring; promtool checks and tests the rules in `make
// monitoring-check`).
const (
	monitoringDir = "../packaging/monitoring/"
	dashboardFile = monitoringDir + "clusterrebootd-dashboard.json"
	alertsFile    = monitoringDir + "clusterrebootd-alerts.yaml"
	alertsTest    = monitoringDir + "clusterrebootd-alerts.test.yaml"
)

type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type dashboardPanel struct {
	ID      int              `json:"id"`
	Type    string           `json:"type"`
	Title   string           `json:"title"`
	Panels  []dashboardPanel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func readAlerts(t *testing.T) alertRules {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var r alertRules
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	return r
}

func readDashboard(t *testing.T) []dashboardPanel {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string           `json:"uid"`
		Panels []dashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: no uid or no panels", dashboardFile)
	}
	var all []dashboardPanel
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return all
}

// exportedNames are the metric names the project writes: the daemon's
// families (a histogram also as its _bucket, _sum and _count series) and
// crd-detect's.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, e := range []exposition{daemonExposition(t), detectExposition(t)} {
		for n, f := range e.families {
			names[n] = true
			if f.GetType().String() == "HISTOGRAM" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					names[n+s] = true
				}
			}
		}
	}
	return names
}

var metricName = regexp.MustCompile(`\bclusterrebootd_[a-zA-Z0-9_]+`)

// Every series a dashboard query or an alert names is one the daemon or
// crd-detect really exports: a renamed metric breaks this test, not the
// operator's pager.
func TestMonitoringNamesExportedSeries(t *testing.T) {
	exported := exportedNames(t)
	var exprs [][2]string // where, expr
	for _, g := range readAlerts(t).Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, [2]string{alertsFile + ": " + r.Alert, r.Expr})
		}
	}
	for _, p := range readDashboard(t) {
		for _, tg := range p.Targets {
			exprs = append(exprs, [2]string{dashboardFile + ": " + p.Title, tg.Expr})
		}
	}
	test, err := os.ReadFile(alertsTest)
	if err != nil {
		t.Fatal(err)
	}
	exprs = append(exprs, [2]string{alertsTest, string(test)})
	used := 0
	for _, e := range exprs {
		names := metricName.FindAllString(e[1], -1)
		if len(names) == 0 && e[1] != string(test) {
			t.Errorf("%s: %q names no clusterrebootd series", e[0], e[1])
		}
		for _, n := range names {
			used++
			if !exported[n] {
				t.Errorf("%s: %s is not a series the daemon or crd-detect exports", e[0], n)
			}
		}
	}
	if used == 0 {
		t.Fatal("no metric names found")
	}
}

// Each alert has a severity, a summary and a description, and a case in the
// promtool test file; the dashboard's panel ids are unique and each
// non-row panel has a query.
func TestMonitoringShape(t *testing.T) {
	test, err := os.ReadFile(alertsTest)
	if err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range readAlerts(t).Groups {
		for _, r := range g.Rules {
			t.Run(r.Alert, func(t *testing.T) {
				if !strings.HasPrefix(r.Alert, "ClusterRebootd") || slices.Contains(alerts, r.Alert) {
					t.Errorf("alert name %q: not ClusterRebootd… or twice", r.Alert)
				}
				if s := r.Labels["severity"]; s != "warning" && s != "critical" {
					t.Errorf("severity %q", s)
				}
				if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
					t.Errorf("annotations %v: want summary and description", r.Annotations)
				}
				if !strings.Contains(string(test), "alertname: "+r.Alert+"\n") {
					t.Errorf("no case in %s", alertsTest)
				}
			})
			alerts = append(alerts, r.Alert)
		}
	}
	for _, want := range []string{"ClusterRebootdRebootPendingTooLong", "ClusterRebootdRolloutStalled", "ClusterRebootdRebootLoop",
		"ClusterRebootdNodeNotBack", "ClusterRebootdEtcdUnreachable"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s", want)
		}
	}
	ids := map[int]bool{}
	for _, p := range readDashboard(t) {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
}

// docs/daemon.md's metrics table lists every family the daemon writes.
func TestDaemonMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/daemon.md")
	if err != nil {
		t.Fatal(err)
	}
	for n := range daemonExposition(t).families {
		if !strings.Contains(string(doc), "| `"+n) {
			t.Errorf("docs/daemon.md does not list %s", n)
		}
	}
}
