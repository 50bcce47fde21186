package driver

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// The daemon sends nothing itself: it tells each publish child since when
// and why the node is blocked (one episode while it stays blocked, whatever
// the reason), and counts the notifications the children report.
func TestBlockedEpisodeAndNotificationMetrics(t *testing.T) {
	w := newWorld(t)
	w.child.answers[StepPublish] = answer{json: `{"tool":"crd-lock","exit_code":0,"notifications":{"sent":[{"event":"node_blocked","destination":"https://h/***"}],"failed":[{"event":"node_blocked","destination":"slack://***","error":"HTTP 500"}]}}`}
	d := newDriver(t, w, testConfig(w), nil)
	start := w.now
	publish := func(st Status) []string {
		t.Helper()
		d.setStatus(st)
		if err := d.Publish(context.Background()); err != nil {
			t.Fatal(err)
		}
		return w.child.args[len(w.child.args)-1]
	}
	flag := func(args []string, name string) string {
		if i := slices.Index(args, name); i >= 0 {
			return args[i+1]
		}
		return ""
	}
	args := publish(Status{State: policy.StateBlocked, Reason: ReasonHealth, Detail: "db lagging", RebootRequired: true})
	if flag(args, "--blocked-since") != start.UTC().Format(time.RFC3339) || flag(args, "--blocked-reason") != ReasonHealth {
		t.Errorf("first blocked publish args %q", args)
	}
	w.now = start.Add(2 * time.Hour)
	args = publish(Status{State: policy.StateBlocked, Reason: ReasonPolicy, Detail: "too few healthy", RebootRequired: true})
	if flag(args, "--blocked-since") != start.UTC().Format(time.RFC3339) || flag(args, "--blocked-reason") != ReasonPolicy {
		t.Errorf("the episode goes on with a new reason: %q", args)
	}
	args = publish(Status{State: policy.StatePostReboot, Reason: ReasonPostReboot, Detail: "health script exited 1", RebootRequired: false})
	if flag(args, "--blocked-since") != start.UTC().Format(time.RFC3339) || flag(args, "--blocked-reason") != ReasonPostReboot {
		t.Errorf("failing post-reboot checks are part of the episode: %q", args)
	}
	if args = publish(Status{State: policy.StateIdle}); slices.Contains(args, "--blocked-since") {
		t.Errorf("idle publish args %q", args)
	}
	w.now = start.Add(3 * time.Hour)
	args = publish(Status{State: policy.StateBlocked, Reason: ReasonRebootLoop, RebootRequired: true})
	if flag(args, "--blocked-since") != w.now.UTC().Format(time.RFC3339) {
		t.Errorf("a new episode keeps the old start: %q", args)
	}
	var b bytes.Buffer
	if _, err := d.metrics.Registry.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`clusterrebootd_notifications_sent_total{event="node_blocked"} 5`, `clusterrebootd_notifications_failed_total{event="node_blocked"} 5`,
		`clusterrebootd_notifications_failed_total{event="slot_expired"} 0`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, b.String())
		}
	}
}
