package testscripts

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// TestFailureBudgetHoles reproduces, through the real binaries against a
// real etcd, the failure budget's holes a review found (issue 38); each
// case fails on the code before protocol 3. Reboot slots live at least 60
// s (reboot_slot_ttl_sec's minimum), so the cases run side by side.
func TestFailureBudgetHoles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries; a minute and more of slot leases")
	}
	bin, srv, client := realAdmission(t)

	// A node lost in its reboot whose health record still lives (three
	// publish intervals, here 180 s) names the boot its slot was taken in:
	// once the slot ends it is a failure all the same. Before, the record
	// excused it and the next node was admitted 60 s after the first went
	// down, with max_holders 1 (issue 38, 1).
	t.Run("a lost node with a live record halts the fleet", func(t *testing.T) {
		t.Parallel()
		e := newAdmissionEnv(t, bin, srv.Endpoint, client, "holes-record", "health_publish_interval_sec: 60\n")
		lost := e.node(t, "lost")
		lost.run(t, exitcode.OK, "crd-lock", "step", "publish", "--state", "rebooting", "--reboot-required=true", "--last-check", time.Now().UTC().Format(time.RFC3339))
		lost.run(t, exitcode.OK, "crd-lock", "hold", "--reboot-slot", "--config", lost.conf, "--", "true")
		e.waitSlotGone(t, "lost", 90*time.Second)
		if !e.exists(t, "nodes/lost") {
			t.Fatal("the lost node's record expired with its slot: the case needs it alive")
		}
		e.refusedHalted(t)
	})

	// A resume acknowledges the failures it names: a node in its reboot at
	// the resume and lost after it halts the rollout again. Before, the
	// acknowledgement's revision covered its in-flight record, and the next
	// node was admitted (issue 38, 2).
	t.Run("a loss after the resume halts again", func(t *testing.T) {
		t.Parallel()
		e := newAdmissionEnv(t, bin, srv.Endpoint, client, "holes-resume", "max_holders: 2\n")
		z, a := e.node(t, "z"), e.node(t, "a")
		z.run(t, exitcode.OK, "crd-lock", "hold", "--reboot-slot", "--config", z.conf, "--", "true")
		time.Sleep(15 * time.Second)
		a.run(t, exitcode.OK, "crd-lock", "hold", "--reboot-slot", "--config", a.conf, "--", "true")
		e.waitSlotGone(t, "z", 90*time.Second)
		if !e.exists(t, "rebooting/a") {
			t.Fatal("a's slot ended before the resume: the case needs it in flight")
		}
		e.refusedHalted(t)
		out := e.cand().run(t, exitcode.OK, "clusterrebootd", "resume", "--config", e.conf, "--reason", "z reinstalled", "--format", "json")
		e.waitSlotGone(t, "a", 30*time.Second)
		e.refusedHalted(t)
		if !strings.Contains(out, `"acknowledged":["z/`) {
			t.Fatalf("resume: %s, want z's failure acknowledged by name", out)
		}
	})

	// Every renewal of a slot renews its in-flight record: with
	// reboot_slot_ttl_sec 120 and failure_window_sec 60 the record's lease is
	// 180 s from the take; a slot renewed after more than 60 s (here COMMAND
	// took 65 s) would otherwise outlive its record, and a node lost then
	// would leave no failure (issue 38, 3).
	t.Run("the in-flight record is renewed with its slot", func(t *testing.T) {
		t.Parallel()
		e := newAdmissionEnv(t, bin, srv.Endpoint, client, "holes-renew", "reboot_slot_ttl_sec: 120\nrollout: {failure_window_sec: 60}\n")
		e.cand().run(t, exitcode.OK, "crd-lock", "hold", "--reboot-slot", "--config", e.conf, "--", "sleep", "65")
		b, err := os.ReadFile(filepath.Join(e.dir, "state", slot.ClaimFile))
		if err != nil {
			t.Fatal(err)
		}
		var cl slot.Claim
		if err := json.Unmarshal(b, &cl); err != nil {
			t.Fatal(err)
		}
		l := cl.Leases()
		ttl := func(id clientv3.LeaseID) int64 {
			r, err := client.TimeToLive(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			return r.TTL
		}
		if s, in := ttl(l.Slot), ttl(l.Inflight); s < 115 || in < s+60-2 {
			t.Fatalf("after COMMAND (65 s) the slot has %d s and its in-flight record %d s: the record must outlive the slot by the failure window (60 s)", s, in)
		}
	})
}

// With failure_scope group, `clusterrebootd resume --group` ends one
// group's halt: that group's failures are acknowledged by name and its
// nodes admitted again, while another group stays halted, its failures
// counting, until it is resumed in turn; the refusal names the command.
func TestResumeOfOneGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries; a minute of slot leases")
	}
	bin, srv, client := realAdmission(t)
	e := newAdmissionEnv(t, bin, srv.Endpoint, client, "resume-group", "rollout: {failure_scope: group}\n")
	x, y := e.nodeIn(t, "x", "rack1"), e.nodeIn(t, "y", "rack2")
	x.run(t, exitcode.OK, "crd-lock", "hold", "--reboot-slot", "--config", x.conf, "--", "true")
	y.run(t, exitcode.OK, "crd-lock", "hold", "--reboot-slot", "--config", y.conf, "--", "true")
	e.waitSlotGone(t, "x", 90*time.Second)
	e.waitSlotGone(t, "y", 30*time.Second)
	c1, c2 := e.nodeIn(t, "c1", "rack1"), e.nodeIn(t, "c2", "rack2")
	if out := c1.refusedHalted(t); !strings.Contains(out, `clusterrebootd resume --group \"rack1\" --reason TEXT`) {
		t.Fatalf("c1's refusal: %s, want it to name resume --group rack1", out)
	}
	c2.refusedHalted(t)

	e.cand().run(t, exitcode.Config, "clusterrebootd", "resume", "--config", e.conf, "--group", "rack3", "--reason", "typo")
	out := e.cand().run(t, exitcode.OK, "clusterrebootd", "resume", "--config", e.conf, "--group", "rack1", "--reason", "rack1 reinstalled", "--format", "json")
	for _, want := range []string{`"acknowledged":["x/`, `"scope":"group:rack1"`, `"still_halted":["group:rack2"]`, `"failures":["x (slot_expired)"]`} {
		if !strings.Contains(out, want) {
			t.Fatalf("resume --group rack1: %s, want %s", out, want)
		}
	}
	c2.refusedHalted(t)
	c1.run(t, exitcode.OK, "crd-lock", "hold", "--reboot-slot", "--config", c1.conf, "--", "true")

	out = e.cand().run(t, exitcode.OK, "clusterrebootd", "resume", "--config", e.conf, "--group", "rack2", "--reason", "rack2 reinstalled", "--format", "json")
	if !strings.Contains(out, `"failures":["y (slot_expired)"]`) || strings.Contains(out, "still_halted") {
		t.Fatalf("resume --group rack2: %s, want y's failure acknowledged and nothing left halted", out)
	}
	c2.run(t, exitcode.OK, "crd-lock", "hold", "--reboot-slot", "--config", c2.conf, "--", "true")
}

// nodeIn is node in group.
func (e *admissionEnv) nodeIn(t *testing.T, name, group string) *nodeEnv {
	t.Helper()
	n := e.node(t, name)
	b, err := os.ReadFile(n.conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.conf, []byte(strings.Replace(string(b), "\ngroup: g\n", "\ngroup: "+group+"\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// nodeEnv is another node of an admission case's fleet, on this machine:
// the case's configuration under its name.
type nodeEnv struct {
	e    *admissionEnv
	name string
	conf string
}

// node writes the configuration of node name beside the case's.
func (e *admissionEnv) node(t *testing.T, name string) *nodeEnv {
	t.Helper()
	dir := filepath.Join(e.dir, "n-"+name)
	for _, d := range []string{"state", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	base, err := os.ReadFile(e.conf)
	if err != nil {
		t.Fatal(err)
	}
	conf := mergeTop(string(base), strings.TrimPrefix(string(e.yaml), string(base)))
	conf = strings.Replace(conf, "node_name: cand\n", "node_name: "+name+"\n", 1)
	conf = strings.ReplaceAll(conf, filepath.Join(e.dir, "state"), filepath.Join(dir, "state"))
	conf = strings.ReplaceAll(conf, filepath.Join(e.dir, "run"), filepath.Join(dir, "run"))
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return &nodeEnv{e: e, name: name, conf: path}
}

// mergeTop is base with extra's top-level lines ("key: value") in place of
// base's lines of the same key, the others appended: one document, as a
// by-hand step reads it on stdin.
func mergeTop(base, extra string) string {
	lines := strings.Split(strings.TrimRight(base, "\n"), "\n")
	for _, x := range strings.Split(strings.TrimSpace(extra), "\n") {
		key, _, ok := strings.Cut(x, ":")
		if !ok || x == "" {
			continue
		}
		replaced := false
		for i, l := range lines {
			if strings.HasPrefix(l, key+":") {
				lines[i], replaced = x, true
			}
		}
		if !replaced {
			lines = append(lines, x)
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// cand is the case's own node.
func (e *admissionEnv) cand() *nodeEnv { return &nodeEnv{e: e, name: "cand", conf: e.conf} }

// run runs a binary as this node (its configuration on stdin and in
// --config's place for the steps by hand), wants exit code want, and
// returns its stdout.
func (n *nodeEnv) run(t *testing.T, want exitcode.Code, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(n.e.bin, name), args...)
	conf, err := os.ReadFile(n.conf)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = strings.NewReader(string(conf))
	cmd.Env = append(os.Environ(), "CRD_CONFIG="+n.conf)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	got := 0
	if x, ok := err.(*exec.ExitError); ok {
		got = x.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if got != int(want) {
		t.Fatalf("%s %s %v = exit %d, want %d\n%s\n%s", n.name, name, args, got, want, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func (e *admissionEnv) exists(t *testing.T, key string) bool {
	t.Helper()
	resp, err := e.client.Get(context.Background(), e.ns+key, clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count > 0
}

func (e *admissionEnv) waitSlotGone(t *testing.T, node string, within time.Duration) {
	t.Helper()
	testsupport.Eventually(t, within, node+"'s slot to end", func() bool { return !e.exists(t, "rebooting/"+node) })
}

// refusedHalted asserts the case's own node, through the pipeline, is not
// admitted because the rollout halted, and its COMMAND does not run.
func (e *admissionEnv) refusedHalted(t *testing.T) {
	t.Helper()
	e.cand().refusedHalted(t)
}

// refusedHalted asserts this node, through the pipeline, is not admitted
// because the rollout halted, and its COMMAND does not run; it returns the
// pipeline's output.
func (n *nodeEnv) refusedHalted(t *testing.T) string {
	t.Helper()
	marker := filepath.Join(n.e.dir, "rebooted-"+n.name)
	out := n.run(t, exitcode.KillSwitch, "crd-lock", "hold", "--reboot-slot", "--config", n.conf, "--timeout", "20s", "--", "touch", marker)
	if !strings.Contains(out, "not admitted (rule halted)") {
		t.Fatalf("%s: %s, want it refused: halted", n.name, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("%s's COMMAND ran", n.name)
	}
	return out
}
