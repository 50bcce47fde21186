package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"gopkg.in/yaml.v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// publishArgs are publish's flags for state, as by hand.
func publishArgs(state string) []string {
	return []string{"--state", state, "--reboot-required=" + strconv.FormatBool(state == policy.StateNeedsReboot),
		"--last-check", "2026-03-01T02:03:04Z", "--detail", "window closed"}
}

// decodeView reads the "view" field of a step's output.
func decodeView(t *testing.T, o outcome) policy.View {
	t.Helper()
	var r struct {
		View policy.View `json:"view"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil {
		t.Fatal(err)
	}
	return r.View
}

func TestPublishReusesItsLease(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	ctx := context.Background()
	recordLease := func() int64 {
		resp, err := c.Get(ctx, "/t/"+ns+"/nodes/node-a")
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("record: %v, %v", resp, err)
		}
		return resp.Kvs[0].Lease
	}

	o := n.run(append([]string{"publish", "--read-view"}, publishArgs(policy.StateBlocked)...)...)
	if o.code != exitcode.OK {
		t.Fatalf("publish = %d %s %s", o.code, o.stdout, o.stderr)
	}
	first := recordLease()
	v := decodeView(t, o)
	if len(v.Nodes) != 1 || v.Nodes[0].Node != "node-a" || v.Nodes[0].State != policy.StateBlocked ||
		v.Nodes[0].Reason != "window closed" || !v.Nodes[0].LastCheck.Equal(time.Date(2026, 3, 1, 2, 3, 4, 0, time.UTC)) || v.ReadAt.IsZero() {
		t.Errorf("view after publish = %+v", v)
	}
	ttl, err := c.TimeToLive(ctx, clientv3.LeaseID(first))
	if err != nil || ttl.GrantedTTL != 30 {
		t.Errorf("publish lease TTL = %+v, %v; want 3 × health_publish_interval_sec = 30", ttl, err)
	}

	t.Run("second publish keeps the lease", func(t *testing.T) {
		if o := n.run(append([]string{"publish"}, publishArgs(policy.StateNeedsReboot)...)...); o.code != exitcode.OK {
			t.Fatalf("publish = %d %s", o.code, o.stdout)
		}
		if got := recordLease(); got != first {
			t.Errorf("second publish used lease %x, want %x again", got, first)
		}
		b, _ := os.ReadFile(filepath.Join(n.dir, "run", leaseFile))
		if strings.TrimSpace(string(b)) != fmt.Sprintf("%x", first) {
			t.Errorf("run_dir/publish-lease = %q, want %x", b, first)
		}
	})
	t.Run("an expired lease is replaced", func(t *testing.T) {
		if _, err := c.Revoke(ctx, clientv3.LeaseID(first)); err != nil {
			t.Fatal(err)
		}
		if o := n.run(append([]string{"publish"}, publishArgs(policy.StateIdle)...)...); o.code != exitcode.OK {
			t.Fatalf("publish = %d %s", o.code, o.stdout)
		}
		if got := recordLease(); got == first || got == 0 {
			t.Errorf("publish after expiry used lease %x, want a new one", got)
		}
	})
	t.Run("a changed interval moves the record to a new lease", func(t *testing.T) {
		before := recordLease()
		n.cfg["health_publish_interval_sec"] = 20
		if o := n.run(append([]string{"publish"}, publishArgs(policy.StateIdle)...)...); o.code != exitcode.OK {
			t.Fatalf("publish = %d %s", o.code, o.stdout)
		}
		after := recordLease()
		ttl, err := c.TimeToLive(ctx, clientv3.LeaseID(after))
		if after == before || err != nil || ttl.GrantedTTL != 60 {
			t.Errorf("lease %x → %x (TTL %+v, %v); want a new lease of 60 s", before, after, ttl, err)
		}
		if old, err := c.TimeToLive(ctx, clientv3.LeaseID(before)); err != nil || old.TTL != -1 {
			t.Errorf("old lease still alive: %+v, %v", old, err)
		}
	})
	t.Run("bad state", func(t *testing.T) {
		if o := n.run("publish", "--state", "sleeping"); o.code != exitcode.Config {
			t.Errorf("publish --state sleeping = %d, want 2", o.code)
		}
	})
}

func TestViewShowsSlotsAndPause(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	a := newNode(t, embedded.Endpoint, ns, "node-a")
	ctx := context.Background()
	grant, err := c.Grant(ctx, 120)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "/t/"+ns+"/rebooting/node-b", `{"node":"node-b","group":"","since":"2026-01-01T00:00:00Z"}`, clientv3.WithLease(grant.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "/t/"+ns+"/rebooting/node-c", `garbage`); err != nil {
		t.Fatal(err)
	}
	if o := a.run("pause", "--reason", "black friday"); o.code != exitcode.OK || o.json["changed"] != true {
		t.Fatalf("pause = %d %s", o.code, o.stdout)
	}
	o := a.run(append([]string{"publish", "--read-view"}, publishArgs(policy.StateIdle)...)...)
	v := decodeView(t, o)
	if len(v.Rebooting) != 2 || v.Rebooting[0].Node != "node-b" || v.Rebooting[0].TTLSec <= 0 || v.Rebooting[0].TTLSec > 120 ||
		v.Rebooting[1].Node != "node-c" {
		t.Errorf("slots in view = %+v; want node-b with its TTL and the unreadable node-c", v.Rebooting)
	}
	if v.Paused == nil || v.Paused.Reason != "black friday" || v.Paused.By != "node-a" || v.Paused.Since.IsZero() {
		t.Errorf("pause in view = %+v", v.Paused)
	}
	if v.Healthy("node-b") || !v.Healthy("node-a") {
		t.Errorf("Healthy: node-b rebooting must not count, node-a must")
	}
}

// Without --read-view a publication writes the record and reads the pause
// key only: its output has no view, whatever the other nodes publish.
func TestIdlePublishReadsOnlyThePause(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	a := newNode(t, embedded.Endpoint, ns, "node-a")
	ctx := context.Background()
	for _, other := range []string{"node-b", "node-c"} {
		if _, err := c.Put(ctx, "/t/"+ns+"/nodes/"+other, `{"v":1,"node":"`+other+`","state":"idle"}`); err != nil {
			t.Fatal(err)
		}
	}
	publish := func() map[string]any {
		t.Helper()
		o := a.run(append([]string{"publish"}, publishArgs(policy.StateIdle)...)...)
		if o.code != exitcode.OK {
			t.Fatalf("publish = %d %s", o.code, o.stdout)
		}
		if _, ok := o.json["view"]; ok {
			t.Errorf("an idle publication returned the view: %s", o.stdout)
		}
		return o.json
	}
	if out := publish(); out["paused"] != nil {
		t.Errorf("paused = %v, want none", out["paused"])
	}
	resp, err := c.Get(ctx, "/t/"+ns+"/nodes/node-a")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("record: %v, %v", resp, err)
	}
	var rec policy.NodeRecord
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil || rec.V != policy.ProtocolVersion || rec.State != policy.StateIdle {
		t.Errorf("record %s (%v); want state idle, v %d", resp.Kvs[0].Value, err, policy.ProtocolVersion)
	}
	if o := a.run("pause", "--reason", "black friday"); o.code != exitcode.OK {
		t.Fatalf("pause = %d %s", o.code, o.stdout)
	}
	if p, _ := publish()["paused"].(map[string]any); p == nil || p["reason"] != "black friday" || p["v"] != float64(policy.ProtocolVersion) {
		t.Errorf("paused after pause = %v", p)
	}
	// An operator's hold and reboot request for this node come with every
	// publication too (one key each); another node's do not.
	for _, args := range [][]string{
		{"hold", "--node", "node-a", "--reason", "migration"},
		{"request", "--node", "node-a", "--reason", "leak"},
		{"hold", "--node", "node-b", "--reason", "other"},
	} {
		if o := a.run(args...); o.code != exitcode.OK {
			t.Fatalf("%v = %d %s", args, o.code, o.stdout)
		}
	}
	out := publish()
	h, _ := out["hold"].(map[string]any)
	r, _ := out["request"].(map[string]any)
	if h == nil || h["node"] != "node-a" || h["reason"] != "migration" || r == nil || r["reason"] != "leak" {
		t.Errorf("publish: hold %v request %v, want this node's", out["hold"], out["request"])
	}
}

// A record a newer version wrote (higher "v", unknown fields) is in the
// view and its node healthy; one this version cannot decode is left out:
// its node is not healthy (docs/cluster-protocol.md, "Versions").
func TestViewAcrossVersions(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	a := newNode(t, embedded.Endpoint, ns, "node-a")
	ctx := context.Background()
	if _, err := c.Put(ctx, "/t/"+ns+"/nodes/node-b", `{"v":2,"node":"node-b","state":"idle","lock":"/t/`+ns+`/lock","labels":{"rack":"r1"},"drain":true}`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "/t/"+ns+"/nodes/node-c", `{"v":2,"node":"node-c","state":"idle","last_check":1767225600}`); err != nil {
		t.Fatal(err)
	}
	v := decodeView(t, a.run(append([]string{"publish", "--read-view"}, publishArgs(policy.StateIdle)...)...))
	if !v.Healthy("node-b") || v.Healthy("node-c") || len(v.Nodes) != 2 {
		t.Errorf("view %+v: want node-a and node-b (newer, healthy), not node-c (undecodable)", v.Nodes)
	}
}

func TestPauseResumeStatus(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	steps := []struct {
		args    []string
		code    exitcode.Code
		changed bool
	}{
		{[]string{"pause"}, exitcode.Config, false},
		{[]string{"pause", "--reason", "first"}, exitcode.OK, true},
		{[]string{"pause", "--reason", "second"}, exitcode.OK, false},
		{[]string{"resume"}, exitcode.OK, true},
		{[]string{"resume"}, exitcode.OK, false},
	}
	for _, s := range steps {
		o := n.run(s.args...)
		if o.code != s.code || (o.code == exitcode.OK && o.json["changed"] != s.changed) {
			t.Errorf("%v = %d %s, want %d changed=%v", s.args, o.code, o.stdout, s.code, s.changed)
		}
		if strings.Join(s.args, " ") == "pause --reason second" {
			if p, _ := o.json["paused"].(map[string]any); p["reason"] != "first" {
				t.Errorf("a second pause must keep the first reason: %s", o.stdout)
			}
		}
	}

	key := n.cfg["lock_key"].(string)
	held, err := lock.Acquire(context.Background(), c, lock.Options{Key: key, TTL: 5 * time.Second, Node: "node-z", RPCTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	o := n.run("status")
	var st protocol.StatusResult
	if err := json.Unmarshal([]byte(o.stdout), &st); err != nil || o.code != exitcode.OK {
		t.Fatalf("status = %d %s (%v)", o.code, o.stdout, err)
	}
	if st.Lock.Key != key || len(st.Lock.Holders) != 1 || st.Lock.Holders[0].Node != "node-z" || st.View.Paused != nil || st.Node != "node-a" {
		t.Errorf("status = %+v", st)
	}
}

func TestStepErrors(t *testing.T) {
	n := newNode(t, embedded.Endpoint, nsName(t), "node-a")
	unreachable := newNode(t, "http://127.0.0.1:1", nsName(t), "node-a")
	unreachable.cfg["etcd_dial_timeout_sec"] = 1
	for _, tc := range []struct {
		name  string
		n     *node
		stdin *string
		args  []string
		code  exitcode.Code
	}{
		{"no step", n, nil, []string{}, exitcode.Config},
		{"unknown step", n, nil, []string{"reboot-now"}, exitcode.Config},
		{"bad flag", n, nil, []string{"cycle", "--attempts", "3"}, exitcode.Config},
		{"stray argument", n, nil, []string{"status", "extra"}, exitcode.Config},
		{"empty stdin", n, strPtr(""), []string{"status"}, exitcode.Config},
		{"invalid config", n, strPtr("lock_ttl_sec: 1\nnode_name: a\n"), []string{"status"}, exitcode.Config},
		{"not yaml", n, strPtr("{{{"), []string{"status"}, exitcode.Config},
		{"help", n, nil, []string{"cycle", "--help"}, exitcode.OK},
		{"etcd unreachable: status", unreachable, nil, []string{"status"}, exitcode.EtcdUnavailable},
		{"etcd unreachable: report", unreachable, nil, []string{"report"}, exitcode.EtcdUnavailable},
		{"report takes no argument", n, nil, []string{"report", "--format", "csv"}, exitcode.Config},
		{"etcd unreachable: cycle", unreachable, nil, []string{"cycle"}, exitcode.EtcdUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdin := tc.n.yaml()
			if tc.stdin != nil {
				stdin = *tc.stdin
			}
			var out, errb testsupport.SyncBuffer
			err := runStep(context.Background(), tc.args, strings.NewReader(stdin), &out, &errb, realWorld())
			if got := exitcode.CodeOf(err); got != tc.code {
				t.Fatalf("code = %d (%v), want %d", got, err, tc.code)
			}
			var hdr map[string]any
			if strings.Count(out.String(), "\n") != 1 || json.Unmarshal([]byte(out.String()), &hdr) != nil || hdr["tool"] != "crd-lock" {
				t.Fatalf("stdout is not one JSON object from crd-lock: %q", out.String())
			}
			if tc.name == "etcd unreachable: cycle" && (hdr["outcome"] != protocol.OutcomeBlocked || hdr["reason"] != protocol.ReasonEtcd) {
				t.Errorf("cycle without etcd = %s, want blocked/etcd", out.String())
			}
		})
	}
}

func strPtr(s string) *string { return &s }

func TestServeMetrics(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "metrics.prom")
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	stdinR, stdinW := io.Pipe()
	var out, errb testsupport.SyncBuffer
	done := make(chan error, 1)
	// As the daemon runs it: the request, then the pipe stays open.
	go func() {
		done <- runStep(context.Background(), []string{"serve-metrics"}, stdinR, &out, &errb, realWorld())
	}()
	req, err := protocol.NewRequest(protocol.StepServeMetrics, protocol.ServeMetricsArgs{Listen: addr, File: file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := req.Encode()
	if err != nil {
		t.Fatal(err)
	}
	go stdinW.Write(data)
	get := func(path string) (int, string, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, "", err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	testsupport.Eventually(t, 5*time.Second, "the server answers /healthz", func() bool { code, _, _ := get("/healthz"); return code == 200 })
	if code, _, _ := get("/metrics"); code != http.StatusServiceUnavailable {
		t.Errorf("/metrics before the file exists = %d, want 503", code)
	}
	writeFile(t, file, "clusterrebootd_reboot_required 1\n")
	if code, ctype, body := get("/metrics"); code != 200 || ctype != ExpositionContentType || body != "clusterrebootd_reboot_required 1\n" {
		t.Errorf("/metrics = %d %q %q", code, ctype, body)
	}
	stdinW.Close() // the daemon died
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), `"stopped":"stdin_closed"`) {
			t.Errorf("serve-metrics = %v, %s", err, out.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve-metrics did not stop when stdin closed")
	}

	t.Run("address in use", func(t *testing.T) {
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var out testsupport.SyncBuffer
		err = runStep(context.Background(), []string{"serve-metrics", "--listen", l.Addr().String(), "--file", file}, strings.NewReader(""), &out, io.Discard, realWorld())
		if exitcode.CodeOf(err) != exitcode.Config {
			t.Errorf("serve-metrics on a busy port = %v, want exit 2", err)
		}
	})
	t.Run("signal", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		r, w := io.Pipe()
		defer w.Close()
		done := make(chan error, 1)
		var out testsupport.SyncBuffer
		go func() {
			done <- runStep(ctx, []string{"serve-metrics", "--listen", "127.0.0.1:0", "--file", file}, r, &out, io.Discard, realWorld())
		}()
		cancel()
		if err := <-done; err != nil || !strings.Contains(out.String(), `"stopped":"signal"`) {
			t.Errorf("serve-metrics after SIGTERM = %v, %s", err, out.String())
		}
	})
}

// By hand, `crd-lock step cycle [flags] < config.yaml` runs the step over
// the YAML configuration (validated; the other tests send the daemon's
// request), and the daemon's type decodes its result. The flags are those a
// daemon from before the request passed (--root, --log-level, --log-format,
// then the step's), so the child an upgrade installs serves the daemon still
// running until it restarts.
func TestByHandConfig(t *testing.T) {
	n := newNode(t, embedded.Endpoint, nsName(t), "node-a")
	cfg, err := config.Parse("test", []byte(n.yaml()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.PreRebootHooks = []config.Hook{{Name: "drain", Cmd: []string{"/bin/true"}, TimeoutSec: 5}}
	stdin, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out testsupport.SyncBuffer
	var res protocol.CycleResult
	argv := []string{protocol.StepCycle, "--root", "/", "--log-level", "info", "--log-format", "json", "--attempt", "2"}
	err = runStep(context.Background(), argv, strings.NewReader(string(stdin)), &out, io.Discard, realWorld())
	if derr := protocol.DecodeResult([]byte(out.String()), &res); err != nil || derr != nil || res.Outcome != protocol.OutcomeRebooting || res.Node != "node-a" || res.Attempt != 2 {
		t.Fatalf("cycle from YAML = %v (%v): %s", err, derr, out.String())
	}
	var plain protocol.CycleResult
	if err := protocol.DecodeResult([]byte(out.String()), &plain); err != nil || plain.Outcome != protocol.OutcomeRebooting || plain.LeaseID == "" {
		t.Errorf("the daemon's type does not decode the result: %v %+v", err, plain)
	}
}

// A node's rules key survives its reboot unchanged: run_dir is emptied by
// a reboot, and a rules key rewritten after each one would make every
// admission of the fleet read every rules key again (lib/slot RulesCache).
// A remembered lease that etcd no longer has (a restored etcd) is replaced
// at once, not after a day of failed publications.
func TestRulesKeyOutlivesAReboot(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	ctx := context.Background()
	rulesKey := func() (modRev, lease int64) {
		t.Helper()
		resp, err := c.Get(ctx, "/t/"+ns+"/rules/node-a")
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("rules key: %v, %v", resp, err)
		}
		return resp.Kvs[0].ModRevision, resp.Kvs[0].Lease
	}
	publish := func() {
		t.Helper()
		if o := n.run(append([]string{"publish"}, publishArgs(policy.StateIdle)...)...); o.code != exitcode.OK {
			t.Fatalf("publish = %d %s %s", o.code, o.stdout, o.stderr)
		}
	}
	publish()
	rev, lease := rulesKey()
	if err := os.RemoveAll(filepath.Join(n.dir, "run")); err != nil {
		t.Fatal(err)
	}
	publish()
	if r, l := rulesKey(); r != rev || l != lease {
		t.Errorf("after run_dir was emptied the rules key moved: revision %d → %d, lease %x → %x", rev, r, lease, l)
	}
	if _, err := c.Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	publish()
	if _, l := rulesKey(); l == lease || l == 0 {
		t.Errorf("rules key's lease after its lease was revoked = %x, want a new one", l)
	}
}
