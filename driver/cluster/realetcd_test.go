package cluster

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// TestRealEtcdServer runs publish, a real-mode cycle, complete and a cycle
// that must wait for another node's slot against the etcd server binary
// named by ETCD_TEST_BIN (`make etcd` builds .tools/bin/etcd; Debian's
// /usr/bin/etcd is 3.4), the truth the embedded server stands in for.
func TestRealEtcdServer(t *testing.T) {
	bin := os.Getenv("ETCD_TEST_BIN")
	if bin == "" {
		t.Skip("ETCD_TEST_BIN is not set: run `make etcd` and set ETCD_TEST_BIN=.tools/bin/etcd (or /usr/bin/etcd)")
	}
	srv, err := etcdtest.Start(etcdtest.Options{Binary: bin, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ns := nsName(t)
	a := newNode(t, srv.Endpoint, ns, "node-a")
	b := newNode(t, srv.Endpoint, ns, "node-b")
	a.boot, b.boot = "a-boot-1", "b-boot-1"

	if o := a.run(append([]string{"publish"}, publishArgs(policy.StateNeedsReboot)...)...); o.code != exitcode.OK {
		t.Fatalf("publish = %d %s", o.code, o.stdout)
	}
	if o := a.run("cycle"); o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting {
		t.Fatalf("cycle a = %d %s %s", o.code, o.stdout, o.stderr)
	}
	// node-b must wait until node-a's slot is freed.
	done := make(chan outcome, 1)
	var stderr testsupport.SyncBuffer
	go func() { done <- b.step(context.Background(), []string{"cycle"}, nil, &stderr) }()
	testsupport.Eventually(t, 10*time.Second, "node-b waits for node-a's slot", func() bool { return strings.Contains(stderr.String(), "slot_waiting") })
	if b.rebootCalls() != nil {
		t.Fatal("node-b rebooted while node-a held its slot")
	}
	a.boot = "a-boot-2" // back from the reboot: complete refuses in the boot the slot was taken in
	if o := a.run("complete"); o.code != exitcode.OK || o.json["freed"] != true {
		t.Fatalf("complete a = %d %s", o.code, o.stdout)
	}
	expectRebooting(t, done, 10*time.Second, "node-b's cycle after node-a's slot was freed")
	b.boot = "b-boot-2"
	if o := b.run("complete"); o.code != exitcode.OK {
		t.Fatalf("complete b = %d %s", o.code, o.stdout)
	}
}
