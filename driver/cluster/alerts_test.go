package cluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// fakeAlertmanager answers /api/v2/alerts with body.
func fakeAlertmanager(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v2/alerts" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

const nodeDown = `[{"labels":{"alertname":"NodeDown","instance":"node-a:9100"},"status":{"state":"active","silencedBy":[],"inhibitedBy":[]}}]`

// `crd-lock step alerts` answers the daemon's alert checks without etcd
// (the endpoint here refuses connections): exit 0 quiet, 3 firing, with
// the blocking alerts in its JSON and its log.
func TestStepAlerts(t *testing.T) {
	for _, tc := range []struct {
		name, body, phase string
		code              exitcode.Code
		passed            bool
		reason            string
	}{
		{"quiet", `[]`, "pre-lock", exitcode.OK, true, "no matching alert firing at URL (alertmanager)"},
		{"firing", nodeDown, "post-reboot", exitcode.HealthBlocked, false, `1 matching alert(s) firing at URL (alertmanager): NodeDown{instance="node-a:9100"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := fakeAlertmanager(t, tc.body)
			n := newNode(t, "http://127.0.0.1:1", "unused", "node-a")
			n.cfg["gate"] = map[string]any{"alerts": []map[string]any{{"url": url}}}
			o := n.run("alerts", "--phase", tc.phase)
			if o.code != tc.code || o.str("phase") != tc.phase {
				t.Fatalf("step alerts = %d (%v)\n%s\n%s", o.code, o.err, o.stdout, o.stderr)
			}
			checks, _ := o.json["checks"].([]any)
			if len(checks) != 1 {
				t.Fatalf("checks: %s", o.stdout)
			}
			chk := checks[0].(map[string]any)
			want := strings.ReplaceAll(tc.reason, "URL", url)
			if chk["passed"] != tc.passed || chk["reason"] != want {
				t.Errorf("check %v, want passed=%v %q", chk, tc.passed, want)
			}
			if quoted, _ := json.Marshal(want); !strings.Contains(o.stderr, `"reason":`+string(quoted)) {
				t.Errorf("the log does not carry the reason %q:\n%s", want, o.stderr)
			}
		})
	}
	t.Run("bad phase", func(t *testing.T) {
		n := newNode(t, "http://127.0.0.1:1", "unused", "node-a")
		if o := n.run("alerts", "--phase", "later"); o.code != exitcode.Config {
			t.Errorf("step alerts --phase later = %d, want 2\n%s", o.code, o.stdout)
		}
	})
}

// Under the lock the cycle child runs the alert checks itself: a firing
// alert stops the reboot with reason health, naming the alert.
func TestCycleAlertUnderLock(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	url := fakeAlertmanager(t, nodeDown)
	n.cfg["gate"] = map[string]any{"alerts": []map[string]any{{"url": url, "match": []string{`instance=~"{{.Node}}:.*"`}}}}
	o := n.run("cycle")
	if o.code != exitcode.HealthBlocked || o.str("reason") != protocol.ReasonHealth || !strings.Contains(o.str("detail"), `NodeDown{instance="node-a:9100"}`) {
		t.Fatalf("cycle = %d %s: %s\n%s", o.code, o.str("reason"), o.str("detail"), o.stderr)
	}
	if calls := n.rebootCalls(); calls != nil {
		t.Errorf("reboot command ran: %q", calls)
	}
	assertFree(t, c, n)
}
