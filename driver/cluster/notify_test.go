package cluster

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/notifications"
)

// hookReceiver is a local webhook receiver: it records the payloads in the
// order they arrive and answers status.
type hookReceiver struct {
	mu  sync.Mutex
	got []notifications.Payload
	srv *httptest.Server
}

func newReceiver(t *testing.T, status int) *hookReceiver {
	r := &hookReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var p notifications.Payload
		b, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(b, &p); err != nil {
			t.Errorf("the webhook got no JSON: %q", b)
		}
		r.mu.Lock()
		r.got = append(r.got, p)
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.got {
		out = append(out, p.Event)
	}
	return out
}

func (r *hookReceiver) payload(event string) notifications.Payload {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.got {
		if p.Event == event {
			return p
		}
	}
	return notifications.Payload{}
}

// hangingReceiver accepts requests and never answers while the test runs.
func hangingReceiver(t *testing.T) (string, func() int) {
	release := make(chan struct{})
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		<-release
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: lets Close return
	return srv.URL, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

func notifyTo(n *node, webhooks ...string) {
	n.cfg["notifications"] = map[string]any{"webhooks": webhooks, "timeout_sec": 1}
}

func failedEvents(o outcome) []string {
	var out []string
	nots, _ := o.json["notifications"].(map[string]any)
	failed, _ := nots["failed"].([]any)
	for _, f := range failed {
		out = append(out, f.(map[string]any)["event"].(string))
	}
	return out
}

// Pause, resume, a reboot and its completion reach the receiver in order
// with their fields filled, while a receiver that answers 500 and one that
// never answers delay nothing: every step finishes, the reboot command
// runs, and their failures are in each step's JSON.
func TestNotificationsThroughARollout(t *testing.T) {
	ns := nsName(t)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	n.boot = "boot-1"
	good := newReceiver(t, http.StatusNoContent)
	bad := newReceiver(t, http.StatusInternalServerError)
	hang, hangCount := hangingReceiver(t)
	notifyTo(n, good.srv.URL+"/hook?token=s3cret", bad.srv.URL+"/s3cret", hang+"/s3cret")

	if o := n.run("pause", "--reason", "change freeze"); o.code != exitcode.OK || len(failedEvents(o)) != 2 {
		t.Fatalf("pause = %d %s\n%s", o.code, o.stdout, o.stderr)
	}
	if o := n.run("pause", "--reason", "again"); o.code != exitcode.OK || o.json["notifications"] != nil {
		t.Errorf("a pause already in effect notified again: %s", o.stdout)
	}
	if o := n.run("resume"); o.code != exitcode.OK {
		t.Fatalf("resume = %d %s", o.code, o.stdout)
	}

	cycle := n.run("cycle")
	if cycle.code != exitcode.OK || cycle.str("outcome") != protocol.OutcomeRebooting || len(n.rebootCalls()) != 2 {
		t.Fatalf("cycle = %d %s, calls %q; want the reboot despite the failing receivers\n%s", cycle.code, cycle.stdout, n.rebootCalls(), cycle.stderr)
	}
	if f := failedEvents(cycle); len(f) != 2 || f[0] != "reboot_starting" {
		t.Errorf("cycle's failed notifications = %q, want reboot_starting twice (500, hanging)", f)
	}
	n.boot = "boot-2"
	complete := n.run("complete")
	if complete.code != exitcode.OK || complete.json["freed"] != true {
		t.Fatalf("complete = %d %s", complete.code, complete.stdout)
	}

	want := []string{"paused", "resumed", "reboot_starting", "reboot_completed"}
	if got := good.events(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the receiver got %q, want %q", got, want)
	}
	if got := bad.events(); len(got) != 4 {
		t.Errorf("the 500 receiver was asked %d times, want 4: %q", len(got), got)
	}
	if hangCount() == 0 {
		t.Error("the hanging receiver was never asked")
	}
	p := good.payload("paused")
	if p.Node != "node-a" || p.By != "node-a" || p.Reason != "change freeze" || !strings.Contains(p.Message, "paused cluster-wide by node-a: change freeze") {
		t.Errorf("paused payload %+v", p)
	}
	p = good.payload("reboot_starting")
	if p.Node != "node-a" || p.Lock != "/t/"+ns+"/lock" || p.FencingToken != int64(cycle.json["fencing_token"].(float64)) ||
		p.Slot != "/t/"+ns+"/rebooting/node-a" || p.Time == "" || !strings.Contains(p.Message, "node-a is rebooting") {
		t.Errorf("reboot_starting payload %+v", p)
	}
	p = good.payload("reboot_completed")
	if p.FencingToken != int64(cycle.json["fencing_token"].(float64)) || p.Duration == "" || p.Since == "" || !strings.Contains(p.Message, "node-a rebooted") {
		t.Errorf("reboot_completed payload %+v", p)
	}
	for _, o := range []outcome{cycle, complete} {
		if strings.Contains(o.stdout+o.stderr, "s3cret") {
			t.Errorf("a webhook secret in the output:\n%s\n%s", o.stdout, o.stderr)
		}
	}
	if !strings.Contains(cycle.stderr, `"event":"notify_failed"`) {
		t.Errorf("the failures are not logged:\n%s", cycle.stderr)
	}
}

// reboot_starting goes out as soon as the slot is taken, while the
// pre-reboot hook still runs; a failing hook then sends reboot_failed.
func TestNotifyStartingThenFailed(t *testing.T) {
	ns := nsName(t)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	good := newReceiver(t, http.StatusOK)
	notifyTo(n, good.srv.URL)
	n.cfg["max_holders"] = 2
	done, resume := cycleInHook(t, n)
	testsupport.Eventually(t, 10*time.Second, "reboot_starting before the hook ends", func() bool { return len(good.events()) == 1 })
	resume()
	<-done

	// A hook that fails: the slot is freed and reboot_failed says why.
	n2 := newNode(t, embedded.Endpoint, ns, "node-b")
	notifyTo(n2, good.srv.URL)
	n2.cfg["max_holders"] = 2
	script(t, filepath.Join(n2.dir, "hook.sh"), "echo drain refused >&2; exit 3")
	n2.cfg["pre_reboot_hooks"] = []map[string]any{{"name": "drain", "cmd": []string{filepath.Join(n2.dir, "hook.sh")}, "timeout_sec": 5}}
	o := n2.run("cycle")
	if o.code != exitcode.RebootFailed {
		t.Fatalf("cycle = %d %s", o.code, o.stdout)
	}
	p := good.payload("reboot_failed")
	if p.Node != "node-b" || p.Reason != protocol.ReasonHook || !strings.Contains(p.Detail, "drain refused") || !strings.Contains(p.Message, "reboot of node-b was aborted (hook)") {
		t.Errorf("reboot_failed payload %+v (events %q)", p, good.events())
	}
}

// A node that never comes back: two other nodes publish after its slot's
// TTL, and slot_expired is sent once for the cluster.
func TestSlotExpiredNotifiedOncePerCluster(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	good := newReceiver(t, http.StatusOK)
	a := newNode(t, embedded.Endpoint, ns, "node-a")
	notifyTo(a, good.srv.URL)
	if o := a.run("cycle"); o.code != exitcode.OK {
		t.Fatalf("cycle = %d %s", o.code, o.stdout)
	}
	_, lease := slotOf(t, c, ns, "node-a")
	later := func(w *world) { w.now = func() time.Time { return time.Now().Add(61 * time.Second) } }

	b, d := newNode(t, embedded.Endpoint, ns, "node-b"), newNode(t, embedded.Endpoint, ns, "node-c")
	notifyTo(b, good.srv.URL)
	notifyTo(d, good.srv.URL)
	// Before the TTL passed, with the slot still there: nothing.
	if o := b.step(context.Background(), []string{"publish"}, nil, nil); o.code != exitcode.OK || o.json["notifications"] != nil {
		t.Fatalf("publish = %d %s", o.code, o.stdout)
	}
	if _, err := c.Revoke(context.Background(), clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, n := range []*node{b, d, b, d} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o := n.step(context.Background(), []string{"publish"}, later, nil); o.code != exitcode.OK {
				t.Errorf("publish = %d %s", o.code, o.stdout)
			}
		}()
	}
	wg.Wait()
	if got := good.events(); strings.Join(got, " ") != "reboot_starting slot_expired" {
		t.Fatalf("the receiver got %q, want reboot_starting and one slot_expired", got)
	}
	p := good.payload("slot_expired")
	if p.Node != "node-a" || p.Slot != "/t/"+ns+"/rebooting/node-a" || !strings.Contains(p.Message, "reboot slot of node-a") {
		t.Errorf("slot_expired payload %+v", p)
	}
	resp, err := c.Get(context.Background(), "/t/"+ns+"/notified/slot_expired/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Errorf("notified keys %+v, %v; want one on a lease", resp, err)
	}
	// The node's own late return finds the same slot expired: not again.
	a.boot = "boot-2"
	if o := a.run("complete"); o.code != exitcode.OK || o.json["freed"] != false {
		t.Fatalf("complete = %d %s", o.code, o.stdout)
	}
	if got := good.events(); strings.Join(got, " ") != "reboot_starting slot_expired reboot_completed" {
		t.Errorf("after the late return the receiver got %q", got)
	}
}

// node_blocked goes out once per blocked episode after blocked_after_sec,
// reboot_loop at once; waiting for a window is not reported.
func TestNotifyBlockedOncePerEpisode(t *testing.T) {
	ns := nsName(t)
	good := newReceiver(t, http.StatusOK)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	n.cfg["notifications"] = map[string]any{"webhooks": []string{good.srv.URL}, "timeout_sec": 1, "blocked_after_sec": 600}
	since := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	pub := func(reason string, since time.Time) outcome {
		return n.run("publish", "--state", "blocked", "--reboot-required=true", "--detail", reason+": it says no",
			"--blocked-since", since.Format(time.RFC3339), "--blocked-reason", reason)
	}
	pub(protocol.ReasonWindow, since)
	pub(protocol.ReasonHealth, time.Now().Add(-time.Minute)) // not long enough yet
	if got := good.events(); len(got) != 0 {
		t.Fatalf("sent %q for a window and a short block", got)
	}
	pub(protocol.ReasonHealth, since)
	pub(protocol.ReasonHealth, since)
	pub(protocol.ReasonRebootLoop, since.Add(time.Second))
	pub(protocol.ReasonRebootLoop, since.Add(time.Second))
	// Back from the reboot but failing the post-reboot checks: blocked too.
	if o := n.run("publish", "--state", "post_reboot", "--detail", "post_reboot: health script exited 1",
		"--blocked-since", since.Add(2*time.Second).Format(time.RFC3339), "--blocked-reason", protocol.ReasonPostReboot); o.code != exitcode.OK {
		t.Fatalf("publish = %d %s", o.code, o.stdout)
	}
	want := "node_blocked reboot_loop node_blocked node_blocked"
	if got := strings.Join(good.events(), " "); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	p := good.payload("node_blocked")
	if p.Reason != protocol.ReasonHealth || p.Since != since.Format(time.RFC3339) || !strings.Contains(p.Message, "has been blocked since") {
		t.Errorf("node_blocked payload %+v", p)
	}
}

// The reboot command runs while the only destination still holds
// reboot_starting unanswered (timeout_sec 300): nothing on the way to the
// reboot waits for a notification. The step waits for it only at its end.
func TestRebootCommandDoesNotWaitForNotifications(t *testing.T) {
	ns := nsName(t)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	asked := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		asked <- struct{}{}
		<-release
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(free)
	n.cfg["notifications"] = map[string]any{"webhooks": []string{srv.URL}, "timeout_sec": 300}
	done := make(chan outcome, 1)
	go func() { done <- n.run("cycle") }()
	testsupport.Eventually(t, 20*time.Second, "the reboot command ran while the receiver holds the message", func() bool { return len(n.rebootCalls()) > 0 })
	select {
	case <-asked:
	default:
		t.Fatal("the receiver was never asked")
	}
	select {
	case o := <-done:
		t.Fatalf("the step ended before the notification was answered: %s", o.stdout)
	default:
	}
	free()
	o := <-done
	if o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting || len(failedEvents(o)) != 0 {
		t.Errorf("cycle = %d %s", o.code, o.stdout)
	}
}

// The resumed notification of a resume that ended a halt says the scope,
// the failures acknowledged, what stays halted and why; a resume that only
// lifted the pause says who.
func TestResumedNotificationSaysWhatEnded(t *testing.T) {
	ts, err := notifications.ParseTemplates(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &protocol.RolloutResume{Scope: "group:rack1", Reason: "rack1 fixed", Failures: []string{"x (slot_expired)"}, StillHalted: []string{"group:rack2"}}
	got := ts.Render(resumedFields("op", r))
	if want := "clusterrebootd: reboots are resumed cluster-wide (by op): the halt of group:rack1 ended; failures acknowledged: x (slot_expired); still halted: group:rack2 (why: rack1 fixed)"; got != want {
		t.Errorf("group resume:\n got %q\nwant %q", got, want)
	}
	if got := ts.Render(resumedFields("op", nil)); got != "clusterrebootd: reboots are resumed cluster-wide (by op)" {
		t.Errorf("pause lifted: %q", got)
	}
}
