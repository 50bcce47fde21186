package testscripts

import (
	"path/filepath"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/monitortest"
)

// monitoringCondition answers [alertmanager]: Debian's Alertmanager is
// installed, or CRD_TEST_MONITORING=1 requires it (make test-monitoring: a
// missing binary then fails alertmanager-start instead of skipping).
func monitoringCondition(cond string) (ok, handled bool) {
	if cond != "alertmanager" {
		return false, false
	}
	_, err := monitortest.Binary(monitortest.EnvAlertmanager, monitortest.DefaultAlertmanager)
	return err == nil || monitortest.Required(), true
}

// CmdAlertmanagerStart implements alertmanager-start: Debian's real
// Alertmanager (lib/testonly/monitortest) on a free loopback port, stopped when the
// script ends; $AM_URL is its base URL. Scripts start with
// "[!alertmanager] skip".
func CmdAlertmanagerStart(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) > 0 {
		ts.Fatalf("usage: alertmanager-start")
	}
	am, err := monitortest.RunAlertmanager(filepath.Join(ts.Getenv("WORK"), ".alertmanager"), monitortest.AlertmanagerOptions{})
	ts.Check(err)
	ts.Defer(am.Stop)
	ts.Setenv("AM_URL", am.URL)
}
