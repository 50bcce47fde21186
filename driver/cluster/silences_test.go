package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/silence"
	"github.com/clusterrebootd/clusterrebootd/lib/silence/record"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/monitortest"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// silenced configures n's silences on the Alertmanagers at urls.
func silenced(n *node, required bool, urls ...string) {
	n.cfg["silences"] = map[string]any{
		"alertmanager_url": urls,
		"matchers":         []string{`instance=~"{{.Node}}(:[0-9]+)?"`},
		"required":         required,
		"timeout_sec":      2,
	}
}

func liveSilences(t *testing.T, am *monitortest.Alertmanager) []monitortest.Silence {
	t.Helper()
	var out []monitortest.Silence
	for _, s := range am.Silences(t) {
		if s.Status.State != silence.StateExpired {
			out = append(out, s)
		}
	}
	return out
}

func silenceReport(o outcome) map[string]any {
	m, _ := o.json["silences"].(map[string]any)
	return m
}

// Through the real steps, against Debian's real Alertmanager: the cycle
// that takes the slot creates exactly one silence matching the node, ending
// no later than the slot's lease; a retried cycle creates no second one;
// complete before the boot leaves it; complete after the boot expires it.
func TestCycleSilenceRealAlertmanager(t *testing.T) {
	am := monitortest.StartAlertmanager(t, monitortest.AlertmanagerOptions{})
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	n.boot = "boot-1"
	silenced(n, false, am.URL)

	o := n.run("cycle")
	if o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting {
		t.Fatalf("cycle = %d %s\n%s\n%s", o.code, o.str("outcome"), o.stdout, o.stderr)
	}
	live := liveSilences(t, am)
	if len(live) != 1 || live[0].Matchers[0].Value != "node-a(:[0-9]+)?" || live[0].CreatedBy != "clusterrebootd@node-a" {
		t.Fatalf("live silences = %+v, want one of node-a", live)
	}
	if ids, _ := silenceReport(o)["ids"].([]any); len(ids) != 1 || ids[0] != live[0].ID {
		t.Errorf("cycle's silences = %v, want [%s]", silenceReport(o), live[0].ID)
	}
	_, lease := slotOf(t, c, ns, "node-a")
	ttl, err := c.TimeToLive(context.Background(), clientv3.LeaseID(lease))
	if err != nil {
		t.Fatal(err)
	}
	expiry := time.Now().Add(time.Duration(ttl.TTL+1) * time.Second)
	if live[0].EndsAt.After(expiry) || live[0].EndsAt.Before(time.Now().Add(50*time.Second)) {
		t.Errorf("silence ends at %s; the slot's lease ends about %s (TTL 60 s)", live[0].EndsAt, expiry)
	}
	token := fmt.Sprintf("fencing token %d", int64(o.json["fencing_token"].(float64)))
	for _, w := range []string{"clusterrebootd", "node node-a", "lock /t/" + ns + "/lock", token} {
		if !strings.Contains(live[0].Comment, w) {
			t.Errorf("comment %q does not say %q", live[0].Comment, w)
		}
	}
	am.PostAlert(t, map[string]string{"alertname": "NodeDown", "instance": "node-a:9100"}, nil)
	am.WaitAlert(t, "NodeDown", "suppressed")

	// The reboot command "failed after it started" and the cycle runs again
	// in the same boot: the slot is re-taken, the silence reused.
	if o = n.run("cycle"); o.code != exitcode.OK {
		t.Fatalf("second cycle = %d\n%s", o.code, o.stderr)
	}
	if live = liveSilences(t, am); len(live) != 1 {
		t.Fatalf("after a retried cycle, live silences = %+v, want one", live)
	}

	if o = n.run("complete"); o.code != exitcode.LockBusy || len(liveSilences(t, am)) != 1 {
		t.Fatalf("complete before the boot = %d, live %+v: want 4 and the silence kept", o.code, liveSilences(t, am))
	}
	n.boot = "boot-2"
	o = n.run("complete")
	if o.code != exitcode.OK || o.json["freed"] != true || silenceReport(o)["expired"] != float64(1) {
		t.Fatalf("complete after the boot = %d %s", o.code, o.stdout)
	}
	if l := liveSilences(t, am); len(l) != 0 {
		t.Errorf("live silences after complete: %+v", l)
	}
	if _, err := os.Stat(filepath.Join(n.dir, "state", record.RecordFile)); !os.IsNotExist(err) {
		t.Errorf("the silence record is still in state_dir: %v", err)
	}
}

// closedURL is an Alertmanager URL nobody answers on, with a password.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://ops:s3cret@" + addr
}

// Alertmanager down: with required false the reboot goes on and the failure
// is counted in the result; with required true nothing reboots, the slot is
// freed, and the reason names the Alertmanager (password masked).
func TestCycleSilenceAlertmanagerDown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		required bool
		code     exitcode.Code
		reboots  bool
	}{
		{"not required: the reboot goes on", false, exitcode.OK, true},
		{"required: no reboot", true, exitcode.RebootFailed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := nsName(t)
			c := testsupport.NewClient(t, embedded.Endpoint)
			n := newNode(t, embedded.Endpoint, ns, "node-a")
			n.boot = "boot-1"
			u := closedURL(t)
			silenced(n, tc.required, u)
			o := n.run("cycle")
			if o.code != tc.code || (len(n.rebootCalls()) > 0) != tc.reboots {
				t.Fatalf("cycle = %d, reboot calls %q; want %d, rebooted %v\n%s\n%s", o.code, n.rebootCalls(), tc.code, tc.reboots, o.stdout, o.stderr)
			}
			rep := silenceReport(o)
			masked := strings.Replace(u, "s3cret", "***", 1)
			if rep["create_failures"] != float64(1) || !strings.Contains(o.stdout, masked) || strings.Contains(o.stdout+o.stderr, "s3cret") {
				t.Errorf("silences = %v; want one failure naming %s, no password anywhere\n%s", rep, masked, o.stderr)
			}
			val, _ := slotOf(t, c, ns, "node-a")
			if tc.required {
				if o.str("reason") != protocol.ReasonHook || !strings.Contains(o.str("detail"), masked) || val != "" {
					t.Errorf("reason %q detail %q slot %q; want hook, the URL named, the slot freed", o.str("reason"), o.str("detail"), val)
				}
			} else if val == "" {
				t.Error("the slot is gone although the node rebooted")
			}
		})
	}
}

// A dry run (simulate) creates no silence and says which one a real run
// would create, the password masked.
func TestCycleSilenceDryRun(t *testing.T) {
	ns := nsName(t)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	n.cfg["dry_run"] = true
	u := closedURL(t)
	silenced(n, true, u)
	o := n.run("cycle")
	want := `would silence {instance=~"node-a(:[0-9]+)?"} on ` + strings.Replace(u, "s3cret", "***", 1) + " until the slot's lease ends (60 s)"
	if o.code != exitcode.OK || !strings.Contains(o.str("detail"), want) || o.json["silences"] != nil {
		t.Fatalf("dry run = %d, detail %q, silences %v; want 0 and %q", o.code, o.str("detail"), o.json["silences"], want)
	}
	if _, err := os.Stat(filepath.Join(n.dir, "state", record.RecordFile)); !os.IsNotExist(err) {
		t.Errorf("a dry run recorded silences: %v", err)
	}
}
