package driver

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// The daemon sends nothing itself: it tells each publish child since when
// and why the node is blocked (one episode while it stays blocked, whatever
// the reason), and counts the notifications the children report.
func TestBlockedEpisodeAndNotificationMetrics(t *testing.T) {
	w := newWorld(t)
	w.child.answers[protocol.StepPublish] = answer{json: `{"tool":"crd-lock","exit_code":0,"notifications":{"sent":[{"event":"node_blocked","destination":"https://h/***"}],"failed":[{"event":"node_blocked","destination":"slack://***","error":"HTTP 500"}]}}`}
	d := newDriver(t, w, testConfig(w), nil)
	start := w.now
	publish := func(st Status) protocol.PublishArgs {
		t.Helper()
		d.setStatus(st)
		if err := d.Publish(context.Background()); err != nil {
			t.Fatal(err)
		}
		return publishArgs(t, w.child, len(w.child.args)-1)
	}
	args := publish(Status{State: policy.StateBlocked, Reason: protocol.ReasonHealth, Detail: "db lagging", RebootRequired: true})
	if !args.BlockedSince.Equal(start) || args.BlockedReason != protocol.ReasonHealth {
		t.Errorf("first blocked publish args %+v", args)
	}
	w.now = start.Add(2 * time.Hour)
	args = publish(Status{State: policy.StateBlocked, Reason: protocol.ReasonPolicy, Detail: "too few healthy", RebootRequired: true})
	if !args.BlockedSince.Equal(start) || args.BlockedReason != protocol.ReasonPolicy {
		t.Errorf("the episode goes on with a new reason: %+v", args)
	}
	args = publish(Status{State: policy.StatePostReboot, Reason: protocol.ReasonPostReboot, Detail: "health script exited 1", RebootRequired: false})
	if !args.BlockedSince.Equal(start) || args.BlockedReason != protocol.ReasonPostReboot {
		t.Errorf("failing post-reboot checks are part of the episode: %+v", args)
	}
	if args = publish(Status{State: policy.StateIdle}); !args.BlockedSince.IsZero() {
		t.Errorf("idle publish args %+v", args)
	}
	w.now = start.Add(3 * time.Hour)
	args = publish(Status{State: policy.StateBlocked, Reason: protocol.ReasonRebootLoop, RebootRequired: true})
	if !args.BlockedSince.Equal(w.now) {
		t.Errorf("a new episode keeps the old start: %+v", args)
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
