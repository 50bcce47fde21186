package silence

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/monitortest"

	"github.com/clusterrebootd/clusterrebootd/lib/silence/record"
)

// testNode is node web-1's silence on the given Alertmanagers.
func testNode(t *testing.T, urls ...string) *Node {
	t.Helper()
	cfg := config.Default()
	cfg.NodeName, cfg.StateDir = "web-1", t.TempDir()
	cfg.Silences.AlertmanagerURL = urls
	cfg.Silences.Matchers = []string{`instance=~"{{regexQuote .Node}}(:[0-9]+)?"`, `severity!="info"`}
	n, err := FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// live lists the Alertmanager's silences that are not expired.
func live(t *testing.T, am *monitortest.Alertmanager) []monitortest.Silence {
	t.Helper()
	var out []monitortest.Silence
	for _, s := range am.Silences(t) {
		if s.Status.State != StateExpired {
			out = append(out, s)
		}
	}
	return out
}

// Against Debian's real Alertmanager: the silence is created with the
// node's matchers, comment and createdBy, silences the node's alerts, ends
// at the slot's end, is reused (not duplicated) when the cycle runs again,
// with or without its record, is extended, and is expired.
func TestSilenceLifecycleRealAlertmanager(t *testing.T) {
	am := monitortest.StartAlertmanager(t, monitortest.AlertmanagerOptions{})
	ctx := context.Background()
	n := testNode(t, am.URL)
	ends := time.Now().Add(30 * time.Minute).Truncate(time.Millisecond)
	slot := Slot{Key: "/cluster/clusterrebootd/rebooting/web-1", FencingToken: 42, EndsAt: ends}

	rec, errs := n.Ensure(ctx, slot)
	if len(errs) > 0 || len(rec.Silences) != 1 {
		t.Fatalf("Ensure = %+v, %v", rec, errs)
	}
	got := live(t, am)
	if len(got) != 1 || got[0].ID != rec.Silences[0].ID {
		t.Fatalf("live silences = %+v, want the one recorded %s", got, rec.Silences[0].ID)
	}
	s := got[0]
	if s.CreatedBy != "clusterrebootd@web-1" || !s.EndsAt.Equal(ends) || s.Status.State != StateActive {
		t.Errorf("silence = %+v; want createdBy clusterrebootd@web-1, endsAt %s, active", s, ends)
	}
	for _, w := range []string{"clusterrebootd", "node web-1", "lock /cluster/clusterrebootd/lock", "fencing token 42"} {
		if !strings.Contains(s.Comment, w) {
			t.Errorf("comment %q does not say %q", s.Comment, w)
		}
	}
	if len(s.Matchers) != 2 || s.Matchers[0].Value != `web-1(:[0-9]+)?` || !s.Matchers[0].IsRegex {
		t.Errorf("matchers = %+v", s.Matchers)
	}
	am.PostAlert(t, map[string]string{"alertname": "NodeDown", "instance": "web-1:9100", "severity": "critical"}, nil)
	am.PostAlert(t, map[string]string{"alertname": "NodeDown", "instance": "web-10:9100", "severity": "critical"}, nil)
	if a := am.WaitAlert(t, "NodeDown", "suppressed"); a.Labels["instance"] != "web-1:9100" {
		t.Errorf("suppressed alert = %+v, want web-1's", a.Labels)
	}

	t.Run("a retried cycle reuses the recorded silence", func(t *testing.T) {
		rec2, errs := n.Ensure(ctx, slot)
		if len(errs) > 0 || len(live(t, am)) != 1 || live(t, am)[0].ID != rec2.Silences[0].ID {
			t.Fatalf("Ensure again = %+v, %v; live %+v", rec2, errs, live(t, am))
		}
	})
	t.Run("without its record it is found by createdBy and matchers", func(t *testing.T) {
		if err := record.RemoveRecord(n.StateDir); err != nil {
			t.Fatal(err)
		}
		rec3, errs := n.Ensure(ctx, slot)
		if len(errs) > 0 || len(live(t, am)) != 1 || live(t, am)[0].ID != rec3.Silences[0].ID {
			t.Fatalf("Ensure without record = %+v, %v; live %+v", rec3, errs, live(t, am))
		}
	})
	t.Run("extended with the slot", func(t *testing.T) {
		later := ends.Add(10 * time.Minute)
		rec4, errs := n.Extend(ctx, Slot{EndsAt: later})
		l := live(t, am)
		if len(errs) > 0 || len(l) != 1 || !l[0].EndsAt.Equal(later) || l[0].ID != rec4.Silences[0].ID {
			t.Fatalf("Extend = %+v, %v; live %+v", rec4, errs, l)
		}
	})
	t.Run("expired after the boot", func(t *testing.T) {
		expired, errs := n.Expire(ctx, n.StateDir)
		if len(errs) > 0 || len(expired) != 1 {
			t.Fatalf("Expire = %+v, %v", expired, errs)
		}
		if l := live(t, am); len(l) != 0 {
			t.Fatalf("live silences after Expire: %+v", l)
		}
		if _, ok, _ := record.ReadRecord(n.StateDir); ok {
			t.Error("the record is still in state_dir")
		}
		if expired, errs := n.Expire(ctx, n.StateDir); len(expired)+len(errs) != 0 {
			t.Errorf("a second Expire = %v, %v; want a no-op", expired, errs)
		}
		if err := (Client{URL: am.URL}).Expire(ctx, rec0ID(t, am)); err != nil {
			t.Errorf("expiring an expired silence again: %v", err)
		}
	})
}

// rec0ID is the ID of any silence the Alertmanager holds.
func rec0ID(t *testing.T, am *monitortest.Alertmanager) string {
	all := am.Silences(t)
	if len(all) == 0 {
		t.Fatal("no silence at all")
	}
	return all[0].ID
}

// A silence that Alertmanager refuses (it already ended) is an error
// naming the Alertmanager; nothing is recorded for it.
func TestSilenceRefusedRealAlertmanager(t *testing.T) {
	am := monitortest.StartAlertmanager(t, monitortest.AlertmanagerOptions{})
	n := testNode(t, am.URL)
	rec, errs := n.Ensure(context.Background(), Slot{Key: "k", EndsAt: time.Now().Add(-time.Minute)})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), am.URL) || len(rec.Silences) != 0 {
		t.Fatalf("Ensure = %+v, %v", rec, errs)
	}
}
