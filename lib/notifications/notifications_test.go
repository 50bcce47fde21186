package notifications

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
)

// Every default template renders every field it names, with no "<no value>".
func TestDefaultTemplatesRender(t *testing.T) {
	ts, err := ParseTemplates(nil)
	if err != nil {
		t.Fatal(err)
	}
	f := Fields{Node: "n1", Group: "g", Lock: "/l/lock/g", FencingToken: 42, Reason: "hook", Detail: "drain failed",
		Since: "2026-01-01T00:00:00Z", Time: "2026-01-01T01:00:00Z", By: "ops1", Slot: "/l/rebooting/n1"}
	f.SetDuration(192 * time.Second)
	want := map[string][]string{
		config.NotifyRebootStarting:  {"n1 is rebooting", "lock /l/lock/g", "group g", "fencing token 42"},
		config.NotifyRebootCompleted: {"n1 rebooted", "in 3m12s"},
		config.NotifyRebootFailed:    {"reboot of n1 was aborted (hook): drain failed"},
		config.NotifyNodeBlocked:     {"n1 needs a reboot but has been blocked since 2026-01-01T00:00:00Z (hook): drain failed"},
		config.NotifyRebootLoop:      {"reboot loop on n1: drain failed", "resume --local"},
		config.NotifySlotExpired:     {"reboot slot of n1 (taken 2026-01-01T00:00:00Z) expired", "drain failed"},
		config.NotifyPaused:          {"paused cluster-wide by ops1: hook"},
		config.NotifyResumed:         {"resumed cluster-wide (by ops1)"},
		config.NotifyRolloutHalted:   {"rollout halted itself (seen by n1)", "resume --reason", "drain failed"},
	}
	for _, e := range config.NotifyEvents() {
		t.Run(e, func(t *testing.T) {
			f.Event = e
			msg := ts.Render(f)
			if strings.Contains(msg, "<no value>") || strings.Contains(msg, "template failed") {
				t.Errorf("%s: %q", e, msg)
			}
			if len(want[e]) == 0 {
				t.Fatalf("no expectation for %s", e)
			}
			for _, w := range want[e] {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: %q does not contain %q", e, msg, w)
				}
			}
			// The defaults pass the configuration's own check.
			if err := config.CheckNotifyTemplate(e, DefaultTemplates()[e]); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestTemplateOverride(t *testing.T) {
	ts, err := ParseTemplates(map[string]string{config.NotifyPaused: "{{.Event}} by {{.By}}: {{printf \"%q\" .Reason}}"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ts.Render(Fields{Event: config.NotifyPaused, By: "ops", Reason: "freeze"}); got != `paused by ops: "freeze"` {
		t.Errorf("got %q", got)
	}
	if got := ts.Render(Fields{Event: config.NotifyResumed, By: "ops"}); !strings.Contains(got, "resumed cluster-wide (by ops)") {
		t.Errorf("the other events keep their default: %q", got)
	}
}

// receiver records the webhook payloads it gets, in order.
type receiver struct {
	mu   sync.Mutex
	got  []Payload
	body []string
}

func (r *receiver) handler(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var p Payload
		_ = json.Unmarshal(b, &p)
		r.mu.Lock()
		r.got = append(r.got, p)
		r.body = append(r.body, string(b))
		r.mu.Unlock()
		w.WriteHeader(status)
	}
}

func (r *receiver) payloads() []Payload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Payload(nil), r.got...)
}

// hanging never answers: it waits until the client hangs up (seen once the
// body is read) or the test ends.
func hanging(release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		select {
		case <-req.Context().Done():
		case <-release:
		}
	}
}

func quiet(b *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// In order, with the fields filled; a destination that fails (500) or hangs
// is reported and logged with its masked URL, and the others get everything.
func TestDeliveryOrderAndFailures(t *testing.T) {
	var ok, bad receiver
	okSrv := httptest.NewServer(ok.handler(http.StatusNoContent))
	defer okSrv.Close()
	badSrv := httptest.NewServer(bad.handler(http.StatusInternalServerError))
	defer badSrv.Close()
	release := make(chan struct{})
	hangSrv := httptest.NewServer(hanging(release))
	defer hangSrv.Close()
	defer close(release)

	var logs bytes.Buffer
	n := New(config.Notifications{Webhooks: []string{okSrv.URL + "/hook?token=s3cret", badSrv.URL + "/s3cret", hangSrv.URL + "/s3cret"}, TimeoutSec: 1}, quiet(&logs))
	sent := make(chan struct{})
	go func() {
		// Send returns at once even with a hanging destination.
		n.Send(Fields{Event: config.NotifyRebootStarting, Node: "n1", Lock: "/l/lock", FencingToken: 7})
		n.Send(Fields{Event: config.NotifyRebootFailed, Node: "n1", Reason: "hook", Detail: "x"})
		close(sent)
	}()
	<-sent
	rep := n.Wait()

	got := ok.payloads()
	if len(got) != 2 || got[0].Event != config.NotifyRebootStarting || got[1].Event != config.NotifyRebootFailed {
		t.Fatalf("the good receiver got %+v", got)
	}
	if got[0].FencingToken != 7 || got[0].Lock != "/l/lock" || got[0].V != 1 || got[0].Source != "clusterrebootd" ||
		!strings.Contains(got[0].Message, "n1 is rebooting") {
		t.Errorf("payload fields: %+v", got[0])
	}
	if len(rep.Sent) != 2 {
		t.Errorf("sent %+v", rep.Sent)
	}
	// 2 to the 500 receiver, and the hanging one: the first timed out, the
	// second was abandoned or timed out too.
	if len(rep.Failed) != 4 {
		t.Errorf("failed %+v", rep.Failed)
	}
	var saw500 bool
	for _, f := range rep.Failed {
		saw500 = saw500 || strings.Contains(f.Error, "HTTP 500")
		if strings.Contains(f.Destination+f.Error, "s3cret") {
			t.Errorf("a secret in the report: %+v", f)
		}
	}
	if !saw500 {
		t.Errorf("no HTTP 500 in %+v", rep.Failed)
	}
	if strings.Contains(logs.String(), "s3cret") || !strings.Contains(logs.String(), "notify_failed") {
		t.Errorf("logs:\n%s", logs.String())
	}
}

func TestEventFilter(t *testing.T) {
	var r receiver
	srv := httptest.NewServer(r.handler(http.StatusOK))
	defer srv.Close()
	n := New(config.Notifications{Webhooks: []string{srv.URL}, Events: []string{config.NotifyPaused}, TimeoutSec: 1}, quiet(&bytes.Buffer{}))
	n.Send(Fields{Event: config.NotifyRebootStarting, Node: "n1"})
	n.Send(Fields{Event: config.NotifyPaused, Node: "n1", By: "n1", Reason: "freeze"})
	n.Wait()
	if got := r.payloads(); len(got) != 1 || got[0].Event != config.NotifyPaused {
		t.Errorf("got %+v", got)
	}
	var none *Sender
	none.Send(Fields{Event: config.NotifyPaused})
	if rep := none.Wait(); len(rep.Sent)+len(rep.Failed) != 0 {
		t.Errorf("a nil notifier reported %+v", rep)
	}
}

// shoutrrr's generic webhook service reaches a local receiver; a URL
// shoutrrr does not know fails without its secret in the report.
func TestShoutrrrGeneric(t *testing.T) {
	var r receiver
	srv := httptest.NewServer(r.handler(http.StatusOK))
	defer srv.Close()
	generic := "generic+" + srv.URL + "/hook?template=json"
	n := New(config.Notifications{URLs: []string{generic, "nosuchservice://s3cret@x"}, TimeoutSec: 2}, quiet(&bytes.Buffer{}))
	n.Send(Fields{Event: config.NotifyPaused, Node: "n1", By: "ops1", Reason: "freeze"})
	rep := n.Wait()
	if len(rep.Sent) != 1 || len(rep.Failed) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if strings.Contains(rep.Failed[0].Error+rep.Failed[0].Destination, "s3cret") {
		t.Errorf("secret shown: %+v", rep.Failed[0])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.body) != 1 || !strings.Contains(r.body[0], "paused cluster-wide by ops1: freeze") {
		t.Errorf("shoutrrr generic sent %q", r.body)
	}
}

func TestScrub(t *testing.T) {
	raw := "https://user:s3cretpw@hooks.example:8443/services/s3crettoken?key=s3cretkey"
	err := scrub(errors.New("Post \""+raw+"\": dial tcp: refused; s3cretkey and s3cretpw and s3crettoken"), raw)
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("scrub left a secret: %v", err)
	}
}
