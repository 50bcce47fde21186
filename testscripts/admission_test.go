package testscripts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/cluster"
	"github.com/clusterrebootd/clusterrebootd/lib/fleetlock"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/buildtest"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// The entry points into a reboot (docs/rollout.md): each takes its slot
// through lib/slot.Admission.
const (
	viaDaemon    = "daemon"    // clusterrebootd run --once
	viaPipeline  = "pipeline"  // crd-lock hold --reboot-slot -- COMMAND
	viaFleetLock = "fleetlock" // crd-lock serve fleetlock, POST /v1/pre-reboot
)

// EntryPoints lists every entry point the table covers.
func EntryPoints() []string { return []string{viaDaemon, viaPipeline, viaFleetLock} }

// violation breaks one rule of the admission for the candidate node "cand"
// of group "g": configuration every entry point reads, and keys in etcd.
type violation struct {
	rule string
	// how names the way the rule is broken, when a rule has several.
	how string
	// conf is YAML added to every entry point's configuration.
	conf string
	// setup writes the keys that break the rule; lift removes what keeps
	// a waiting rule from admitting (nil for a refusal).
	setup func(t *testing.T, e *admissionEnv)
	lift  func(t *testing.T, e *admissionEnv)
}

// violations is every rule of slot.Rules(), broken.
func violations() []violation {
	other := func(node, group string, wave int) string {
		return fmt.Sprintf(`{"v":1,"node":%q,"lock":"LOCK","group":%q,"since":"2026-01-01T00:00:00Z","boot_id":"boot-%s","machine_id":"m-%s","max_holders":1,"wave":%d}`, node, group, node, node, wave)
	}
	liftKey := func(key string) func(*testing.T, *admissionEnv) {
		return func(t *testing.T, e *admissionEnv) { e.del(t, key) }
	}
	return []violation{
		{rule: slot.RuleConflict, how: "another machine", setup: func(t *testing.T, e *admissionEnv) {
			// Another machine's slot under the candidate's name.
			e.putLease(t, "rebooting/cand", other("cand", "g", 0))
		}},
		{rule: slot.RuleConflict, how: "an earlier boot", setup: func(t *testing.T, e *admissionEnv) {
			// This machine's slot of a boot that never completed (for a
			// FleetLock client: a daemon's slot under its id).
			mid, _ := os.ReadFile("/etc/machine-id")
			e.putLease(t, "rebooting/cand", fmt.Sprintf(`{"v":1,"node":"cand","lock":"LOCK","group":"g","since":"2026-01-01T00:00:00Z","boot_id":"an-earlier-boot","machine_id":%q}`, strings.TrimSpace(string(mid))))
		}},
		{rule: slot.RulePaused, setup: func(t *testing.T, e *admissionEnv) {
			e.put(t, "disable", `{"reason":"freeze","by":"op","since":"2026-01-01T00:00:00Z"}`)
		}},
		{rule: slot.RuleHalted, setup: func(t *testing.T, e *admissionEnv) {
			// The first lost node's slot simply ran out: its in-flight
			// record without its slot; no halt was written by anyone.
			e.putLease(t, "rollout/inflight/lost", `{"node":"lost","group":"g","lease_id":"1","boot_id":"boot-lost","since":"2026-01-01T00:00:00Z","ttl_sec":60}`)
		}},
		{rule: slot.RuleHeld, setup: func(t *testing.T, e *admissionEnv) {
			e.put(t, "holds/cand", `{"reason":"disk","by":"op","since":"2026-01-01T00:00:00Z"}`)
		}},
		{rule: slot.RuleWave, conf: "rollout: {wave: 1}\nfleetlock: {groups: {g: {wave: 1}}}\n", setup: func(t *testing.T, e *admissionEnv) {
			e.putLease(t, "nodes/canary", `{"node":"canary","state":"needs_reboot","reboot_required":true,"lock":"LOCK","group":"g","boot_id":"boot-canary","wave":0,"v":1}`)
		}},
		{rule: slot.RuleWave, how: "in the busy index", conf: "rollout: {wave: 1}\nfleetlock: {groups: {g: {wave: 1}}}\n", setup: func(t *testing.T, e *admissionEnv) {
			// The records as publish writes them, with their index keys:
			// every record is indexed, so the lower waves' busy nodes are
			// found by their busy keys (lib/slot Fleet.lowerWaves), not in
			// every record. The canary needs its reboot; idle does not.
			for _, n := range []struct{ node, state string }{{"canary", "needs_reboot"}, {"idle", "idle"}} {
				e.putLease(t, "nodes/"+n.node, fmt.Sprintf(`{"node":%q,"state":%q,"reboot_required":%v,"lock":"LOCK","group":"g","boot_id":"boot-%s","wave":0,"v":1}`,
					n.node, n.state, n.state != "idle", n.node))
				e.putLease(t, "index/member/"+n.node, "")
				e.putLease(t, "index/group/g/"+n.node, "")
			}
			e.putLease(t, "index/busy/00/canary", "")
		}},
		{rule: slot.RuleWave, how: "a lower wave's completion bakes", conf: "rollout: {wave: 1, wave_bake_sec: 600}\nfleetlock: {groups: {g: {wave: 1}}}\n", setup: func(t *testing.T, e *admissionEnv) {
			// The canary completed: its mark (a completion writes it on a
			// lease of wave_bake_sec) holds wave 1 back until it ends.
			e.putLease(t, "rollout/wavedone/canary", `{"node":"canary","group":"g","wave":0,"since":"2026-01-01T00:00:00Z"}`)
		}},
		{rule: slot.RulePolicy, conf: "cluster_policies: {min_healthy_absolute: 5}\n"},
		{rule: slot.RuleMaxHolders, setup: func(t *testing.T, e *admissionEnv) {
			e.putLease(t, "rebooting/busy", other("busy", "g", 0))
		}, lift: liftKey("rebooting/busy")},
		{rule: slot.RuleMaxHolders, how: "a plain seat", conf: "max_holders: 2\n", setup: func(t *testing.T, e *admissionEnv) {
			// A reboot in flight and a plain `crd-lock hold` of the group's
			// line (no candidate mark): 3 of 2 with the candidate. An
			// unmarked seat counts whatever its place in line.
			e.putLease(t, "rebooting/busy", strings.Replace(other("busy", "g", 0), `"max_holders":1`, `"max_holders":2`, 1))
			e.putLease(t, "lock/g/7000000000000001", `{"node":"plain","pid":1,"max_holders":2,"queued_at":"2026-01-01T00:00:00Z","v":2}`)
		}, lift: liftKey("lock/g/7000000000000001")},
		{rule: slot.RuleMaxHolders, how: "a percentage of the group", conf: "max_holders: \"50%\"\nfleetlock: {groups: {g: {max_holders: \"50%\"}}}\n", setup: func(t *testing.T, e *admissionEnv) {
			// 50% of the group's 3 nodes (busy, idle, the candidate) is 1,
			// and busy is down; of the fleet's 7 it would be 3. The records
			// as publish writes them, with their index keys (the group's
			// size is counted there: lib/slot Fleet.fleetCounts).
			for _, n := range []struct{ node, group string }{{"busy", "g"}, {"idle", "g"}, {"h1", "h"}, {"h2", "h"}, {"h3", "h"}, {"h4", "h"}} {
				e.putLease(t, "nodes/"+n.node, fmt.Sprintf(`{"node":%q,"state":"idle","lock":"LOCK","group":%q,"boot_id":"boot-%s","v":1}`, n.node, n.group, n.node))
				e.putLease(t, "index/member/"+n.node, "")
				e.putLease(t, "index/group/"+n.group+"/"+n.node, "")
			}
			e.putLease(t, "rebooting/busy", strings.Replace(other("busy", "g", 0), `,"max_holders":1`, "", 1))
		}, lift: liftKey("rebooting/busy")},
		{rule: slot.RuleMaxTotal, conf: "max_holders_total: 1\n", setup: func(t *testing.T, e *admissionEnv) {
			e.putLease(t, "rebooting/elsewhere", other("elsewhere", "h", 0))
		}, lift: liftKey("rebooting/elsewhere")},
		{rule: slot.RuleMinInterval, conf: "rollout: {min_interval_sec: 600}\n", setup: func(t *testing.T, e *admissionEnv) {
			e.putLease(t, "rollout/paced/before", `{"node":"before","group":"g","since":"2026-01-01T00:00:00Z"}`)
		}, lift: liftKey("rollout/paced/before")},
		{rule: slot.RuleRate, conf: "rollout: {max_starts_per_hour: 1}\n", setup: func(t *testing.T, e *admissionEnv) {
			e.putLease(t, "rollout/starts/before/1", `{"node":"before","group":"h","since":"2026-01-01T00:00:00Z"}`)
		}, lift: liftKey("rollout/starts/before/1")},
	}
}

// admissionEnv is one case's etcd namespace, configuration and binaries.
type admissionEnv struct {
	dir, ns, lock, conf string
	// yaml is the whole configuration in one document, as the daemon
	// hands it to its cluster child.
	yaml     []byte
	bin      string
	client   *clientv3.Client
	endpoint string
}

func (e *admissionEnv) put(t *testing.T, key, value string) {
	t.Helper()
	if _, err := e.client.Put(context.Background(), e.ns+key, strings.ReplaceAll(value, "LOCK", e.lock)); err != nil {
		t.Fatal(err)
	}
}

func (e *admissionEnv) putLease(t *testing.T, key, value string) {
	t.Helper()
	g, err := e.client.Grant(context.Background(), 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Put(context.Background(), e.ns+key, strings.ReplaceAll(value, "LOCK", e.lock), clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
}

func (e *admissionEnv) del(t *testing.T, key string) {
	t.Helper()
	if _, err := e.client.Delete(context.Background(), e.ns+key); err != nil {
		t.Fatal(err)
	}
}

// candSlot is the candidate's slot, if it holds one ("": none).
func (e *admissionEnv) candSlot(t *testing.T) string {
	t.Helper()
	resp, err := e.client.Get(context.Background(), e.ns+"rebooting/cand")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	var v struct {
		Via string `json:"via"`
	}
	_ = json.Unmarshal(resp.Kvs[0].Value, &v)
	if v.Via == "" { // the conflict's other machine or boot, not an entry point's
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// TestEveryRuleAtEveryEntryPoint walks the table of docs/rollout.md through
// the real binaries against a real etcd: for every entry point, with no
// rule broken the candidate gets its slot (so the test can fail), and with
// each rule broken it gets none and is told the rule; a waiting rule,
// lifted, admits it.
func TestEveryRuleAtEveryEntryPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	bin, srv, client := realAdmission(t)
	if got, want := ruleNames(violations()), slot.Rules(); !slices.Equal(slices.Compact(got), want) {
		t.Fatalf("the table breaks %v, the admission has %v: every rule needs its row", got, want)
	}
	cases := append([]violation{{rule: "none"}}, violations()...)
	for _, via := range EntryPoints() {
		for _, v := range cases {
			name := v.rule
			if v.how != "" {
				name += "/" + strings.ReplaceAll(v.how, " ", "_")
			}
			t.Run(via+"/"+name, func(t *testing.T) {
				e := newAdmissionEnv(t, bin, srv.Endpoint, client, via+"-"+strings.ReplaceAll(name, "/", "-"), v.conf)
				if v.setup != nil {
					v.setup(t, e)
				}
				switch via {
				case viaDaemon:
					e.daemon(t, v)
				case viaPipeline:
					e.pipeline(t, v)
				case viaFleetLock:
					e.fleetLock(t, v)
				}
			})
		}
	}
	t.Run("docs/cluster-protocol.md lists every rule and entry point", func(t *testing.T) {
		doc, err := os.ReadFile("../docs/cluster-protocol.md")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range slot.Rules() {
			if !bytes.Contains(doc, []byte("| `"+r+"` |")) {
				t.Errorf("docs/cluster-protocol.md has no row for rule %s", r)
			}
		}
		for _, ep := range EntryPoints() {
			if !bytes.Contains(doc, []byte("`"+ep+"`")) {
				t.Errorf("docs/cluster-protocol.md has no column for entry point %s", ep)
			}
		}
	})
}

// realAdmission builds clusterrebootd and crd-lock into a directory of the
// test's and starts a real etcd (the binary in CRD_TEST_ETCD, else the
// embedded server) with a client on it.
func realAdmission(t *testing.T) (bin string, srv *etcdtest.Server, client *clientv3.Client) {
	t.Helper()
	bin = t.TempDir()
	buildtest.Build(t, bin, "clusterrebootd", "clusterrebootd")
	buildtest.Build(t, bin, "crd-lock", "crd-lock")
	srv, err := etcdtest.Start(etcdtest.Options{Binary: os.Getenv("CRD_TEST_ETCD"), Dir: filepath.Join(t.TempDir(), "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return bin, srv, testsupport.NewClient(t, srv.Endpoint)
}

func ruleNames(vs []violation) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.rule)
	}
	return out
}

func newAdmissionEnv(t *testing.T, bin, endpoint string, client *clientv3.Client, name, extra string) *admissionEnv {
	dir := t.TempDir()
	e := &admissionEnv{dir: dir, ns: "/adm-" + name + "/clusterrebootd/", bin: bin, client: client, endpoint: endpoint}
	e.lock = e.ns + "lock"
	for _, d := range []string{"state", "run", "config.d"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "reboot-required"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`node_name: cand
group: g
lock_key: %q
etcd_endpoints: [%q]
etcd_dial_timeout_sec: 3
lock_ttl_sec: 5
backoff_min_sec: 1
backoff_max_sec: 2
health_publish_interval_sec: 1
check_interval_sec: 1
health_script: /bin/true
health_timeout_sec: 2
reboot_required_detectors: [{type: file, path: %q}]
reboot_command: ["/bin/sh", "-c", "touch %s/rebooted"]
reboot_slot_ttl_sec: 60
state_dir: %q
run_dir: %q
kill_switch_file: %q
`, e.lock, endpoint, filepath.Join(dir, "reboot-required"), dir, filepath.Join(dir, "state"), filepath.Join(dir, "run"), filepath.Join(dir, "disable"))
	e.conf = filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(e.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	e.yaml = []byte(conf + extra)
	if extra != "" {
		if err := os.WriteFile(filepath.Join(dir, "config.d", "50-rule.yaml"), []byte(extra), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = client.Delete(context.Background(), e.ns, clientv3.WithPrefix()) })
	return e
}

// start runs one of the binaries; its output is kept.
func (e *admissionEnv) start(t *testing.T, name string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(filepath.Join(e.bin, name), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "CRD_CONFIG=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stdout, &stderr
}

// wait waits for cmd, at most a minute (then it is killed and the test
// fails: a refusal must not wait).
func wait(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s %v still runs after a minute: a refusal must not wait", cmd.Path, cmd.Args[1:])
	}
	return nil
}

// waits asserts a waiting rule at an entry point that waits: no slot while
// it holds, the rule named in the log; lifted, the slot is taken.
func (e *admissionEnv) waits(t *testing.T, v violation, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), `"rule":"`+v.rule+`"`) && !strings.Contains(stderr.String(), "rule="+v.rule) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("%s never said it waits for %s:\n%s", cmd.Path, v.rule, stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s := e.candSlot(t); s != "" {
		t.Fatalf("a slot was taken while %s should make it wait: %s", v.rule, s)
	}
	v.lift(t, e)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after lifting %s: %v\n%s", v.rule, err, stderr)
		}
	case <-time.After(40 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("still waiting 40 s after %s was lifted:\n%s", v.rule, stderr)
	}
	if e.candSlot(t) == "" {
		t.Fatalf("lifted %s, and still no slot", v.rule)
	}
}

func (e *admissionEnv) daemon(t *testing.T, v violation) {
	cmd, stdout, stderr := e.start(t, "clusterrebootd", "run", "--once", "--config", e.conf, "--crd-lock", filepath.Join(e.bin, "crd-lock"), "--log-format", "json")
	if v.lift != nil {
		e.waits(t, v, cmd, stderr)
		return
	}
	err := wait(t, cmd)
	var res struct {
		Reason    string `json:"reason"`
		Detail    string `json:"detail"`
		SlotKey   string `json:"slot_key"`
		Admission struct {
			Rule string `json:"rule"`
		} `json:"admission"`
	}
	_ = json.Unmarshal(stdout.Bytes(), &res)
	if v.rule == "none" {
		if err != nil || e.candSlot(t) == "" {
			t.Fatalf("no rule broken: %v, slot %q\n%s\n%s", err, e.candSlot(t), stdout, stderr)
		}
		return
	}
	if s := e.candSlot(t); s != "" || err == nil {
		t.Fatalf("%s broken, and the daemon took a slot (%v): %s\n%s", v.rule, err, s, stdout)
	}
	if want := cluster.RuleReason(v.rule); res.Reason != want {
		t.Fatalf("%s broken: reason %q (%s), want %q\n%s", v.rule, res.Reason, res.Detail, want, stderr)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "rebooted")); err == nil {
		t.Fatal("the reboot command ran")
	}
	// The daemon may have stopped before the lock, on what its last
	// publication read (an early "not now"). What it runs under the lock,
	// its cluster child's cycle, must refuse by itself.
	child := exec.Command(filepath.Join(e.bin, "crd-lock"), "step", "cycle", "--log-format", "json")
	child.Stdin = bytes.NewReader(e.yaml)
	var cstderr bytes.Buffer
	child.Stderr = &cstderr
	var out bytes.Buffer
	child.Stdout = &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	cerr := wait(t, child)
	res.Admission.Rule = ""
	_ = json.Unmarshal(out.Bytes(), &res)
	// The admission itself said no: no slot was taken and given back.
	if res.Admission.Rule != v.rule || strings.Contains(cstderr.String(), `"event":"slot_taken"`) {
		t.Fatalf("%s broken: the cycle step's admission said %q (slot taken: %v): %s", v.rule, res.Admission.Rule,
			strings.Contains(cstderr.String(), `"event":"slot_taken"`), out.String())
	}
	if s := e.candSlot(t); s != "" || cerr == nil {
		t.Fatalf("%s broken, and the daemon's cycle step took a slot (%v): %s", v.rule, cerr, out.String())
	}
	if want := cluster.RuleReason(v.rule); res.Reason != want {
		t.Fatalf("%s broken: the cycle step's reason %q (%s), want %q", v.rule, res.Reason, res.Detail, want)
	}
}

func (e *admissionEnv) pipeline(t *testing.T, v violation) {
	timeout := "30s"
	if v.lift == nil {
		timeout = "10s"
	}
	cmd, stdout, stderr := e.start(t, "crd-lock", "hold", "--reboot-slot", "--config", e.conf, "--log-format", "json", "--timeout", timeout,
		"--", "/bin/sh", "-c", "touch "+filepath.Join(e.dir, "rebooted"))
	if v.lift != nil {
		e.waits(t, v, cmd, stderr)
		return
	}
	err := wait(t, cmd)
	if v.rule == "none" {
		if err != nil || e.candSlot(t) == "" {
			t.Fatalf("no rule broken: %v, slot %q\n%s\n%s", err, e.candSlot(t), stdout, stderr)
		}
		return
	}
	if s := e.candSlot(t); s != "" || err == nil {
		t.Fatalf("%s broken, and the pipeline took a slot (%v): %s\n%s", v.rule, err, s, stdout)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "rebooted")); err == nil {
		t.Fatalf("%s broken, and COMMAND ran", v.rule)
	}
	if want := "not admitted (rule " + v.rule + ")"; !strings.Contains(stdout.String(), want) {
		t.Fatalf("%s broken: %s, want %q", v.rule, stdout, want)
	}
}

func (e *admissionEnv) fleetLock(t *testing.T, v violation) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd, _, stderr := e.start(t, "crd-lock", "serve", "fleetlock", "--config", e.conf, "--listen", addr, "--seat-timeout", "5s", "--log-format", "json")
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the FleetLock server does not listen: %s", stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ask := func() (int, string, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/pre-reboot", strings.NewReader(`{"client_params":{"id":"cand","group":"g"}}`))
		req.Header.Set("fleet-lock-protocol", "true")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Kind, Value string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Kind, body.Value
	}
	status, kind, value := ask()
	if v.rule == "none" {
		if status != 200 || e.candSlot(t) == "" {
			t.Fatalf("no rule broken: %d %s %s", status, kind, value)
		}
		return
	}
	if status == 200 || e.candSlot(t) != "" {
		t.Fatalf("%s broken, and the client got a slot: %d", v.rule, status)
	}
	want := map[string]string{
		slot.RuleConflict: fleetlock.KindIDConflict, slot.RulePaused: fleetlock.KindPaused, slot.RuleHalted: fleetlock.KindHalted,
		slot.RuleHeld: fleetlock.KindHeld, slot.RuleWave: fleetlock.KindWave, slot.RulePolicy: fleetlock.KindPolicy,
		slot.RuleMaxHolders: fleetlock.KindSemaphoreFull, slot.RuleMaxTotal: fleetlock.KindSemaphoreFull,
		slot.RuleMinInterval: fleetlock.KindPaced, slot.RuleRate: fleetlock.KindPaced,
	}[v.rule]
	if kind != want {
		t.Fatalf("%s broken: %d %s (%s), want kind %s", v.rule, status, kind, value, want)
	}
	if v.lift != nil {
		v.lift(t, e)
		if status, kind, value := ask(); status != 200 || e.candSlot(t) == "" {
			t.Fatalf("lifted %s: %d %s %s, want the slot", v.rule, status, kind, value)
		}
	}
}
