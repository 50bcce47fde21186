package cluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// machineRoot is a file system root with two kernels installed and an
// uptime of one hour, and a world that runs the older kernel.
func machineRoot(t *testing.T) func(*world) {
	root := t.TempDir()
	for _, f := range []string{"boot/vmlinuz-6.1.0-9-amd64", "boot/vmlinuz-6.1.0-28-amd64"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, f), "")
	}
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "proc/uptime"), "3600.40 100.00\n")
	return func(w *world) {
		w.root = root
		w.uname = func() (string, error) { return "6.1.0-9-amd64", nil }
	}
}

func (n *node) publishAs(t *testing.T, edit func(*world), a protocol.PublishArgs) {
	t.Helper()
	if a.LastCheck.IsZero() {
		a.LastCheck = time.Now()
	}
	req, err := protocol.NewRequest(protocol.StepPublish, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := n.stepRequest(t.Context(), req, edit); o.code != exitcode.OK {
		t.Fatalf("%s publish = %d %s", n.name, o.code, o.stdout)
	}
}

// A node's health record says what only it knows: the running and the
// newest installed kernel, and when it booted.
func TestPublishDescribesTheMachine(t *testing.T) {
	ns := nsName(t)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	n.boot = "boot-a-1"
	cl := testsupport.NewClient(t, embedded.Endpoint)
	record := func() policy.NodeRecord {
		t.Helper()
		resp, err := cl.Get(t.Context(), "/t/"+ns+"/nodes/node-a")
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("record: %v %v", resp, err)
		}
		var r policy.NodeRecord
		if err := json.Unmarshal(resp.Kvs[0].Value, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	before := time.Now()
	n.publishAs(t, machineRoot(t), protocol.PublishArgs{State: policy.StateIdle})
	r := record()
	if r.KernelRunning != "6.1.0-9-amd64" || r.KernelInstalled != "6.1.0-28-amd64" || r.BootedAt == nil {
		t.Fatalf("record %+v: want the running 6.1.0-9-amd64, the installed 6.1.0-28-amd64 and the boot time", r)
	}
	if booted := before.Add(-time.Hour).Truncate(time.Second); r.BootedAt.Before(booted.Add(-time.Second)) || r.BootedAt.After(booted.Add(5*time.Second)) {
		t.Errorf("booted_at %s, want about %s (now minus /proc/uptime)", r.BootedAt, booted)
	}
	t.Run("what cannot be read is left out", func(t *testing.T) {
		empty := t.TempDir()
		n.publishAs(t, func(w *world) { w.root = empty; w.uname = func() (string, error) { return "6.1.0-9-amd64", nil } }, protocol.PublishArgs{State: policy.StateIdle})
		if r := record(); r.KernelRunning != "6.1.0-9-amd64" || r.KernelInstalled != "" || r.BootedAt != nil {
			t.Fatalf("record %+v: want the running kernel only", r)
		}
	})
}
