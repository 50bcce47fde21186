package cluster

import (
	"context"
	"os"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// keyExists reports whether key is set.
func keyExists(t *testing.T, c *clientv3.Client, key string) bool {
	t.Helper()
	resp, err := c.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Kvs) > 0
}

// A held node does not reboot (held, exit 6) while another node still can;
// once released it reboots. The hold carries the pause's audit fields and a
// second hold keeps the first one's.
func TestHoldAndReleaseHold(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	a := newNode(t, embedded.Endpoint, ns, "node-a")
	b := newNode(t, embedded.Endpoint, ns, "node-b")
	b.cfg["max_holders"] = 2
	a.cfg["max_holders"] = 2

	// A node nothing in etcd knows is refused, as a typo would be; --force
	// holds it anyway.
	o := b.run("hold", "--node", "node-aa", "--reason", "disk")
	if o.code != exitcode.Config || !strings.Contains(o.str("error"), `no node "node-aa" is known`) || keyExists(t, c, "/t/"+ns+"/holds/node-aa") {
		t.Fatalf("hold of an unknown node = %d %s, want 2 and nothing held", o.code, o.stdout)
	}
	if o = b.run("hold", "--node", "node-aa", "--reason", "disk", "--force"); o.code != exitcode.OK || o.json["changed"] != true {
		t.Fatalf("hold --force = %d %s", o.code, o.stdout)
	}
	if o = a.run("publish", "--state", "idle"); o.code != exitcode.OK {
		t.Fatalf("publish = %d %s", o.code, o.stdout)
	}
	o = b.run("hold", "--node", "node-a", "--reason", "disk replacement CHG-12")
	if o.code != exitcode.OK || o.json["changed"] != true {
		t.Fatalf("hold = %d %s", o.code, o.stdout)
	}
	h, _ := o.json["hold"].(map[string]any)
	if h["reason"] != "disk replacement CHG-12" || h["by"] != "node-b" || h["since"] == "" || o.str("target") != "node-a" {
		t.Errorf("hold lacks the audit fields: %s", o.stdout)
	}
	if o = b.run("hold", "--node", "node-a", "--reason", "another"); o.json["changed"] != false || o.json["hold"].(map[string]any)["reason"] != "disk replacement CHG-12" {
		t.Errorf("second hold = %s, want the first one kept", o.stdout)
	}
	if o = b.run("status"); !strings.Contains(o.stdout, `"holds":[{"node":"node-a","reason":"disk replacement CHG-12"`) {
		t.Errorf("status does not list the hold: %s", o.stdout)
	}

	o = a.run("cycle")
	if o.code != exitcode.KillSwitch || o.str("reason") != protocol.ReasonHeld || !strings.Contains(o.str("detail"), "node node-a is held (disk replacement CHG-12, by node-b") {
		t.Fatalf("held cycle = %d %s: %s, want 6 held\n%s", o.code, o.str("reason"), o.str("detail"), o.stderr)
	}
	assertNothingLeft(t, c, ns, a)
	if o = b.run("cycle"); o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting {
		t.Fatalf("the other node's cycle = %d %s, want it to reboot (the rest of the rollout goes on)", o.code, o.stdout)
	}

	if o = b.run("release-hold", "--node", "node-a"); o.code != exitcode.OK || o.json["changed"] != true {
		t.Fatalf("release-hold = %d %s", o.code, o.stdout)
	}
	if keyExists(t, c, "/t/"+ns+"/holds/node-a") {
		t.Fatal("the hold is still there")
	}
	if o = a.run("cycle"); o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting {
		t.Fatalf("cycle after release-hold = %d %s\n%s", o.code, o.stdout, o.stderr)
	}
}

// A hold given while the pre-reboot hooks run stops the reboot before the
// reboot command.
func TestHoldDuringHooks(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	done, resume := cycleInHook(t, n)
	if o := n.run("hold", "--node", "node-a", "--reason", "wait"); o.code != exitcode.OK {
		t.Fatalf("hold = %d %s", o.code, o.stdout)
	}
	resume()
	o := <-done
	if o.code != exitcode.KillSwitch || o.str("reason") != protocol.ReasonHeld {
		t.Fatalf("cycle = %d %s, want 6 held\n%s", o.code, o.stdout, o.stderr)
	}
	assertNothingLeft(t, c, ns, n)
}

// A requested node reboots although no detector says so, through the
// normal cycle; completing after the boot consumes the request. A request
// for another node changes nothing here.
func TestRequestRebootsAndIsConsumed(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	n.boot = "boot-1"
	os.Remove(n.needed)
	if o := n.run("request", "--node", "node-b", "--reason", "other"); o.code != exitcode.Config {
		t.Fatalf("request of a node nothing knows = %d %s, want 2", o.code, o.stdout)
	}
	if o := n.run("request", "--node", "node-b", "--reason", "other", "--force"); o.code != exitcode.OK {
		t.Fatalf("request --force = %d %s", o.code, o.stdout)
	}
	if o := n.run("publish", "--state", "idle"); o.code != exitcode.OK {
		t.Fatalf("publish = %d %s", o.code, o.stdout)
	}
	if o := n.run("cycle"); o.code != exitcode.No || o.str("reason") != protocol.ReasonNotNeeded {
		t.Fatalf("cycle with another node's request = %d %s, want 1 not_needed", o.code, o.stdout)
	}
	o := n.run("request", "--node", "node-a", "--reason", "kernel livepatch CHG-9")
	if o.code != exitcode.OK || o.json["request"].(map[string]any)["by"] != "node-a" {
		t.Fatalf("request = %d %s", o.code, o.stdout)
	}
	if o = n.run("cycle"); o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting {
		t.Fatalf("requested cycle = %d %s, want 0 rebooting\n%s", o.code, o.stdout, o.stderr)
	}
	key := "/t/" + ns + "/requests/node-a"
	if o = n.run("complete"); !keyExists(t, c, key) {
		t.Fatal("the request was consumed before the reboot")
	}
	n.boot = "boot-2"
	if o = n.run("complete"); o.code != exitcode.OK || keyExists(t, c, key) {
		t.Fatalf("complete after the boot = %d %s; the request is still there: %v\n%s", o.code, o.stdout, keyExists(t, c, key), o.stderr)
	}
	if !keyExists(t, c, "/t/"+ns+"/requests/node-b") {
		t.Error("another node's request was consumed")
	}
}

// Overrides name a valid node and, except release-hold, a reason.
func TestOverrideArgs(t *testing.T) {
	ns := nsName(t)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"hold", "--reason", "x"}, `--node "" is not a node name`},
		{[]string{"hold", "--node", "a/b", "--reason", "x"}, `--node "a/b" is not a node name`},
		{[]string{"hold", "--node", "node-b"}, "--reason is required"},
		{[]string{"request", "--node", "node-b", "--reason", "  "}, "--reason is required"},
		{[]string{"release-hold", "--node", ""}, "is not a node name"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o := n.run(tc.args...)
			if o.code != exitcode.Config || !strings.Contains(o.str("error"), tc.want) {
				t.Errorf("= %d %s, want 2 %q", o.code, o.stdout, tc.want)
			}
		})
	}
}
