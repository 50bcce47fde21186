package cluster

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// One table routes the steps: every step protocol names has a handler, and
// nothing else does.
func TestEveryStepHasAHandler(t *testing.T) {
	var names []string
	for name := range steps {
		names = append(names, name)
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(protocol.Steps()))
	if !slices.Equal(names, want) {
		t.Errorf("handlers %v, steps %v", names, want)
	}
}

// The daemon's request: the child acts on the configuration it carries
// without validating it again (the daemon did), refuses another protocol
// version or another step than its argument (exit 70: the daemon is not
// the one of this crd-lock), and refuses flags beside a request.
func TestRequestOnStdin(t *testing.T) {
	n := newNode(t, embedded.Endpoint, nsName(t), "node-a")
	cfg, err := config.Parse("node.yaml", []byte(n.yaml()))
	if err != nil {
		t.Fatal(err)
	}
	// Invalid (below lock_ttl_sec's minimum), and not validated again: the
	// status step reads the cluster as asked.
	cfg.LockTTLSec = 1
	run := func(argv []string, req protocol.Request) (exitcode.Code, map[string]any, error) {
		t.Helper()
		data, err := req.Encode()
		if err != nil {
			t.Fatal(err)
		}
		var out, errb testsupport.SyncBuffer
		err = runStep(context.Background(), argv, strings.NewReader(string(data)), &out, &errb, realWorld())
		var hdr map[string]any
		if strings.Count(out.String(), "\n") != 1 || json.Unmarshal([]byte(out.String()), &hdr) != nil || hdr["tool"] != "crd-lock" {
			t.Fatalf("stdout is not one JSON object from crd-lock: %q", out.String())
		}
		return exitcode.CodeOf(err), hdr, err
	}
	req, err := protocol.NewRequest(protocol.StepStatus, nil, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if code, hdr, err := run([]string{"status"}, req); code != exitcode.OK || hdr["node"] != "node-a" {
		t.Fatalf("status from a request = %d %v %v", code, err, hdr)
	}
	other := req
	other.Protocol = protocol.Version + 1
	if code, _, err := run([]string{"status"}, other); code != exitcode.Internal || !strings.Contains(err.Error(), "restart clusterrebootd") {
		t.Errorf("another protocol version = %d %v, want 70", code, err)
	}
	if code, _, err := run([]string{"cycle"}, req); code != exitcode.Internal || !strings.Contains(err.Error(), `for step "status"`) {
		t.Errorf("a request for another step = %d %v, want 70", code, err)
	}
	if code, _, err := run([]string{"status", "--log-level", "debug"}, req); code != exitcode.Config || !strings.Contains(err.Error(), "flags and a request") {
		t.Errorf("flags beside a request = %d %v, want 2", code, err)
	}
	bad := req
	bad.Args = json.RawMessage(`{"attempt":2}`)
	if code, _, err := run([]string{"status"}, bad); code != exitcode.Internal {
		t.Errorf("arguments a step has none of = %d %v, want 70", code, err)
	}
	noCfg := req
	noCfg.Config = nil
	if code, _, err := run([]string{"status"}, noCfg); code != exitcode.Internal || !strings.Contains(err.Error(), "no configuration") {
		t.Errorf("a request without a configuration = %d %v, want 70", code, err)
	}
	// By hand the same configuration is validated: exit 2 naming the field.
	n.byHand = true
	n.cfg["lock_ttl_sec"] = 1
	if o := n.run("status"); o.code != exitcode.Config || !strings.Contains(o.stdout, "lock_ttl_sec") {
		t.Errorf("by hand, an invalid configuration = %d %s, want 2 naming lock_ttl_sec", o.code, o.stdout)
	}
}
