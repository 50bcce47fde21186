package driver

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

var testNow = time.Date(2026, 11, 29, 2, 59, 0, 0, time.UTC)

func newWorld(t *testing.T) *world {
	dir := t.TempDir()
	return &world{
		now:      testNow,
		bootID:   "boot-2",
		detect:   &fakeDetect{required: true},
		windows:  &fakeWindows{open: true},
		gate:     &fakeGate{unhealthy: map[string]bool{}},
		hooks:    &fakeHooks{},
		child:    &fakeChild{answers: map[string]answer{}},
		stateDir: dir + "/state",
		runDir:   dir + "/run",
	}
}

func testConfig(w *world) config.Config {
	cfg := config.Default()
	cfg.NodeName = "node-a"
	cfg.StateDir = w.stateDir
	cfg.RunDir = w.runDir
	cfg.KillSwitchFile = "/etc/clusterrebootd/disable"
	cfg.HealthScript = "/bin/true"
	return cfg
}

func newDriver(t *testing.T, w *world, cfg config.Config, logs *bytes.Buffer) *Driver {
	t.Helper()
	if logs == nil {
		logs = &bytes.Buffer{}
	}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	d := New(cfg, w.deps(), log, NewMetrics("test"), NewLimiter(func() time.Time { return w.now }, DefaultRepeatEvery))
	// A view just read: a decision that uses it does not read it again
	// (TestViewReadOnlyWhenUsed covers when it does).
	d.SetView(policy.View{Nodes: []policy.NodeRecord{}, Rebooting: []policy.Slot{}, ReadAt: w.now})
	return d
}

const (
	rebootingJSON = `{"tool":"crd-lock","exit_code":0,"exit_name":"ok","outcome":"rebooting","lock_wait_ms":1500,"lease_id":"694d","fencing_token":7}`
	dryRunJSON    = `{"tool":"crd-lock","exit_code":0,"exit_name":"ok","outcome":"dry_run"}`
)

func TestRunOnce(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(w *world, cfg *config.Config, d *Driver)
		action   string
		reason   string
		code     exitcode.Code
		step     int
		children []string // child steps run, in order
		backoff  bool
		detail   string // substring
	}{
		{name: "not needed: idle, no child", setup: func(w *world, _ *config.Config, _ *Driver) { w.detect.required = false },
			action: ActionIdle, reason: protocol.ReasonNotNeeded, code: exitcode.No, step: 2},
		{name: "kill switch file", setup: func(w *world, _ *config.Config, _ *Driver) { w.kill = true },
			action: ActionBlocked, reason: protocol.ReasonKillSwitch, code: exitcode.KillSwitch, step: 1, detail: "freeze"},
		{name: "cluster pause in the last view", setup: func(w *world, _ *config.Config, d *Driver) {
			d.SetView(policy.View{ReadAt: testNow, Paused: &policy.Pause{Reason: "incident 7", By: "alice"}})
		}, action: ActionBlocked, reason: protocol.ReasonPaused, code: exitcode.KillSwitch, step: 1, detail: "incident 7"},
		{name: "detector error", setup: func(w *world, _ *config.Config, _ *Driver) {
			w.detect.err = exitcode.Errorf(exitcode.DetectorError, "detect: needs-restarting: exit 4")
		}, action: ActionBlocked, reason: protocol.ReasonDetector, code: exitcode.DetectorError, step: 2},
		{name: "window closed", setup: func(w *world, _ *config.Config, _ *Driver) { w.windows.open = false },
			action: ActionBlocked, reason: protocol.ReasonWindow, code: exitcode.WindowClosed, step: 3, detail: "deny window"},
		{name: "window config error", setup: func(w *world, _ *config.Config, _ *Driver) { w.windows.err = errors.New("bad zone") },
			action: ActionBlocked, reason: protocol.ReasonWindow, code: exitcode.WindowClosed, step: 3},
		{name: "policy: too few healthy nodes, view refreshed first", setup: func(w *world, cfg *config.Config, d *Driver) {
			d.SetView(policy.View{ReadAt: testNow.Add(-time.Hour)})
			cfg.ClusterPolicies.MinHealthyAbsolute = 2
			w.child.answers[protocol.StepPublish] = answer{json: `{"tool":"crd-lock","exit_code":0,"view":{"nodes":[{"node":"node-a","state":"needs_reboot"},{"node":"node-b","state":"rebooting"}],"read_at":"2026-11-29T02:58:59Z"}}`}
		}, action: ActionBlocked, reason: protocol.ReasonPolicy, code: exitcode.HealthBlocked, step: 4, children: []string{protocol.StepPublish}, detail: "min_healthy_absolute"},
		{name: "policy without any view", setup: func(w *world, cfg *config.Config, d *Driver) {
			d.SetView(policy.View{})
			cfg.ClusterPolicies.MinHealthyFraction = 0.5
			w.child.answers[protocol.StepPublish] = answer{code: exitcode.EtcdUnavailable, json: `{"exit_code":7,"error":"etcd down"}`}
		}, action: ActionBlocked, reason: protocol.ReasonPolicy, code: exitcode.HealthBlocked, step: 4, children: []string{protocol.StepPublish}, detail: "cluster_view"},
		{name: "pre-lock health gate", setup: func(w *world, _ *config.Config, _ *Driver) { w.gate.unhealthy["pre-lock"] = true },
			action: ActionBlocked, reason: protocol.ReasonHealth, code: exitcode.HealthBlocked, step: 4, detail: "quorum lost"},
		{name: "child reboots", setup: func(w *world, _ *config.Config, _ *Driver) {
			w.child.answers[protocol.StepCycle] = answer{json: rebootingJSON}
		}, action: ActionRebooting, code: exitcode.OK, step: 7, children: []string{protocol.StepCycle}},
		{name: "child dry run", setup: func(w *world, _ *config.Config, _ *Driver) {
			w.child.answers[protocol.StepCycle] = answer{json: dryRunJSON}
		}, action: ActionDryRun, code: exitcode.OK, step: 7, children: []string{protocol.StepCycle}},
		{name: "child: lock busy", setup: func(w *world, _ *config.Config, _ *Driver) {
			w.child.answers[protocol.StepCycle] = answer{code: exitcode.LockBusy, json: `{"exit_code":4,"outcome":"blocked","reason":"lock_busy","detail":"held by node-b"}`}
		}, action: ActionBlocked, reason: protocol.ReasonLockBusy, code: exitcode.LockBusy, step: 5, children: []string{protocol.StepCycle}, backoff: true, detail: "node-b"},
		{name: "child: under-lock health", setup: func(w *world, _ *config.Config, _ *Driver) {
			w.child.answers[protocol.StepCycle] = answer{code: exitcode.HealthBlocked, json: `{"exit_code":3,"outcome":"blocked","reason":"health","detail":"under-lock: exited 1"}`}
		}, action: ActionBlocked, reason: protocol.ReasonHealth, code: exitcode.HealthBlocked, step: 5, children: []string{protocol.StepCycle}, backoff: true},
		{name: "child: slots full", setup: func(w *world, _ *config.Config, _ *Driver) {
			w.child.answers[protocol.StepCycle] = answer{code: exitcode.HealthBlocked, json: `{"exit_code":3,"outcome":"blocked","reason":"reboot_in_progress"}`}
		}, action: ActionBlocked, reason: protocol.ReasonRebootInProgress, code: exitcode.HealthBlocked, step: 5, children: []string{protocol.StepCycle}, backoff: true},
		{name: "child: no longer needed under the lock (debounce)", setup: func(w *world, _ *config.Config, _ *Driver) {
			w.child.answers[protocol.StepCycle] = answer{code: exitcode.No, json: `{"exit_code":1,"outcome":"blocked","reason":"not_needed"}`}
		}, action: ActionIdle, reason: protocol.ReasonNotNeeded, code: exitcode.No, step: 5, children: []string{protocol.StepCycle}},
		{name: "child: hook failed", setup: func(w *world, _ *config.Config, _ *Driver) {
			w.child.answers[protocol.StepCycle] = answer{code: exitcode.RebootFailed, json: `{"exit_code":9,"outcome":"blocked","reason":"hook","detail":"hook drain exited 1"}`}
		}, action: ActionBlocked, reason: protocol.ReasonHook, code: exitcode.RebootFailed, step: 5, children: []string{protocol.StepCycle}, backoff: true},
		{name: "child without a reason: taken from its exit code", setup: func(w *world, _ *config.Config, _ *Driver) {
			w.child.answers[protocol.StepCycle] = answer{code: exitcode.EtcdUnavailable, json: `{"exit_code":7,"error":"etcd: context deadline exceeded"}`}
		}, action: ActionBlocked, reason: protocol.ReasonEtcd, code: exitcode.EtcdUnavailable, step: 5, children: []string{protocol.StepCycle}, backoff: true, detail: "deadline"},
		{name: "child that cannot start", setup: func(w *world, _ *config.Config, _ *Driver) {
			w.child.answers[protocol.StepCycle] = answer{code: exitcode.EtcdUnavailable, err: errors.New("cannot start crd-lock")}
		}, action: ActionBlocked, reason: protocol.ReasonEtcd, code: exitcode.EtcdUnavailable, step: 5, children: []string{protocol.StepCycle}, backoff: true},
		{name: "child says exit 0 but not rebooting: never a reboot", setup: func(w *world, _ *config.Config, _ *Driver) {
			w.child.answers[protocol.StepCycle] = answer{json: `{"exit_code":0,"outcome":"weird"}`}
		}, action: ActionBlocked, reason: protocol.ReasonEtcd, step: 5, code: exitcode.EtcdUnavailable, children: []string{protocol.StepCycle}, backoff: true},
		{name: "reboot loop: max_reboots_per_day reached", setup: func(w *world, cfg *config.Config, _ *Driver) {
			h := History{Reboots: []HistoryEntry{{At: testNow.Add(-20 * time.Hour), BootID: "a"}, {At: testNow.Add(-time.Hour), BootID: "b"}}}
			if err := WriteHistory(w.stateDir, h); err != nil {
				panic(err)
			}
		}, action: ActionBlocked, reason: protocol.ReasonRebootLoop, code: exitcode.RebootLoop, step: 2, detail: "2 reboots in the last 24 hours", children: []string{protocol.StepFailure}},
		{name: "a package manager is mid-transaction: blocked before the lock, no child", setup: func(w *world, _ *config.Config, _ *Driver) {
			w.busy = exitcode.Errorf(exitcode.PackageManagerBusy, "pkgbusy: dpkg is mid-transaction: /var/lib/dpkg/lock is locked by pid 42 (dpkg); no reboot now")
		}, action: ActionBlocked, reason: protocol.ReasonPackageManagerBusy, code: exitcode.PackageManagerBusy, step: 2, detail: "/var/lib/dpkg/lock is locked by pid 42 (dpkg)"},
		{name: "old reboots do not count", setup: func(w *world, cfg *config.Config, _ *Driver) {
			h := History{Reboots: []HistoryEntry{{At: testNow.Add(-30 * time.Hour), BootID: "a"}, {At: testNow.Add(-time.Hour), BootID: "b"}}}
			if err := WriteHistory(w.stateDir, h); err != nil {
				panic(err)
			}
			w.child.answers[protocol.StepCycle] = answer{json: dryRunJSON}
		}, action: ActionDryRun, code: exitcode.OK, step: 7, children: []string{protocol.StepCycle}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			cfg := testConfig(w)
			d := newDriver(t, w, cfg, nil)
			if tt.setup != nil {
				tt.setup(w, &cfg, d)
				d.SetConfig(cfg)
			}
			out := d.RunOnce(context.Background(), Mode{})
			if out.Action != tt.action || out.Reason != tt.reason || out.Code() != tt.code || out.Step != tt.step {
				t.Fatalf("got %s/%s code %v step %d (%s), want %s/%s code %v step %d", out.Action, out.Reason, out.Code(), out.Step, out.Detail, tt.action, tt.reason, tt.code, tt.step)
			}
			if !slices.Equal(w.child.steps(), tt.children) {
				t.Errorf("child steps %v, want %v", w.child.steps(), tt.children)
			}
			if out.backoff != tt.backoff {
				t.Errorf("backoff %v, want %v", out.backoff, tt.backoff)
			}
			if !strings.Contains(out.Detail, tt.detail) {
				t.Errorf("detail %q lacks %q", out.Detail, tt.detail)
			}
			if (out.Err() == nil) != (tt.code == exitcode.OK) {
				t.Errorf("Err %v for code %v", out.Err(), tt.code)
			}
		})
	}
}

// The cycle child gets the attempt number, and the attempt counter resets
// once no reboot is needed.
func TestAttemptsAndStatus(t *testing.T) {
	w := newWorld(t)
	w.child.answers[protocol.StepCycle] = answer{code: exitcode.LockBusy, json: `{"exit_code":4,"outcome":"blocked","reason":"lock_busy"}`}
	cfg := testConfig(w)
	d := newDriver(t, w, cfg, nil)
	for i := 1; i <= 2; i++ {
		out := d.RunOnce(context.Background(), Mode{})
		if out.Attempt != i || w.child.args[i-1] != (protocol.CycleArgs{Attempt: i}) {
			t.Fatalf("attempt %d args %v", out.Attempt, w.child.args[i-1])
		}
	}
	if st := d.Status(); st.State != policy.StateBlocked || st.Reason != protocol.ReasonLockBusy || !st.RebootRequired || !st.LastCheck.Equal(testNow) {
		t.Errorf("status %+v", st)
	}
	w.detect.set(false)
	d.RunOnce(context.Background(), Mode{})
	if st := d.Status(); st.State != policy.StateIdle || st.Reason != "" || st.RebootRequired {
		t.Errorf("status %+v", st)
	}
	w.detect.set(true)
	if out := d.RunOnce(context.Background(), Mode{}); out.Attempt != 1 {
		t.Errorf("attempt after idle: %d", out.Attempt)
	}
	if got := d.metrics.Blocked.Value(protocol.ReasonLockBusy); got != 3 {
		t.Errorf("blocked{lock_busy} = %v", got)
	}
}

// While the child waits for the lock, a local condition that turns false
// stops it (the child then releases its lease).
func TestWatchStopsChild(t *testing.T) {
	tests := []struct {
		name   string
		flip   func(w *world, d *Driver)
		reason string
		action string
	}{
		{"kill switch set", func(w *world, _ *Driver) { w.setKill(true) }, protocol.ReasonKillSwitch, ActionBlocked},
		{"window closed", func(w *world, _ *Driver) { w.windows.setOpen(false) }, protocol.ReasonWindow, ActionBlocked},
		{"no longer needed", func(w *world, _ *Driver) { w.detect.set(false) }, protocol.ReasonNotNeeded, ActionIdle},
		{"reload", func(_ *world, d *Driver) { d.Interrupt("configuration reloaded") }, protocol.ReasonInterrupted, ActionBlocked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.child.answers[protocol.StepCycle] = answer{block: true}
			w.child.started = make(chan struct{})
			d := newDriver(t, w, testConfig(w), nil)
			d.WatchEvery = time.Millisecond
			go func() {
				<-w.child.started
				tt.flip(w, d)
			}()
			out := d.RunOnce(context.Background(), Mode{})
			if out.Reason != tt.reason || out.Action != tt.action || out.Step != 5 {
				t.Fatalf("got %s/%s step %d: %s", out.Action, out.Reason, out.Step, out.Detail)
			}
			if tt.reason != protocol.ReasonNotNeeded && !strings.HasPrefix(out.Detail, "stopped waiting for the lock: ") {
				t.Errorf("detail %q", out.Detail)
			}
		})
	}
	// The watch goes on under the lock, until the reboot command: the
	// detail says so when the child already held the lock.
	t.Run("window closed under the lock", func(t *testing.T) {
		w := newWorld(t)
		w.child.answers[protocol.StepCycle] = answer{block: true, blockJSON: `{"tool":"crd-lock","exit_code":130,"exit_name":"interrupted",` +
			`"outcome":"blocked","reason":"interrupted","lease_id":"694d9a","fencing_token":42}`}
		w.child.started = make(chan struct{})
		d := newDriver(t, w, testConfig(w), nil)
		d.WatchEvery = time.Millisecond
		go func() { <-w.child.started; w.windows.setOpen(false) }()
		out := d.RunOnce(context.Background(), Mode{})
		if out.Reason != protocol.ReasonWindow || !strings.HasPrefix(out.Detail, "stopped under the lock, before the reboot command") {
			t.Fatalf("got %s: %s", out.Reason, out.Detail)
		}
	})
	// An operator's request stands in for the detectors while the child
	// waits, and an emergency one for the windows: neither stops it.
	t.Run("requested, emergency: not stopped", func(t *testing.T) {
		w := newWorld(t)
		w.child.answers[protocol.StepCycle] = answer{block: true, blockJSON: `{"tool":"crd-lock","exit_code":130,"exit_name":"interrupted","outcome":"blocked","reason":"interrupted"}`}
		w.child.started = make(chan struct{})
		node := testConfig(w).NodeName
		req := `{"node":"` + node + `","now":true,"reason":"CVE","by":"op","since":"2026-11-29T02:00:00Z"}`
		w.child.answers[protocol.StepPublish] = answer{json: `{"tool":"crd-lock","exit_code":0,"request":` + req + `}`}
		d := newDriver(t, w, testConfig(w), nil)
		d.WatchEvery = time.Millisecond
		d.SetView(policy.View{}) // stale: the cycle publishes, and reads the request

		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-w.child.started
			w.detect.set(false)
			w.windows.setOpen(false)
			time.Sleep(50 * time.Millisecond) // fifty watch periods
			cancel()
		}()
		out := d.RunOnce(ctx, Mode{})
		if out.Reason != protocol.ReasonInterrupted {
			t.Fatalf("got %s: %s; the request and --now must keep the child waiting (steps %q)", out.Reason, out.Detail, w.child.steps())
		}
	})
	t.Run("daemon stopping", func(t *testing.T) {
		w := newWorld(t)
		w.child.answers[protocol.StepCycle] = answer{block: true}
		w.child.started = make(chan struct{})
		d := newDriver(t, w, testConfig(w), nil)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-w.child.started; cancel() }()
		out := d.RunOnce(ctx, Mode{})
		if out.Reason != protocol.ReasonInterrupted || out.Code() != exitcode.Interrupted || out.backoff {
			t.Fatalf("%+v", out)
		}
	})
}

func TestPublish(t *testing.T) {
	w := newWorld(t)
	w.child.answers[protocol.StepPublish] = answer{json: `{"tool":"crd-lock","exit_code":0,"view":{"nodes":[{"node":"node-b","state":"idle"}],"read_at":"2026-11-29T02:58:00Z"}}`}
	d := newDriver(t, w, testConfig(w), nil)
	d.setStatus(Status{State: policy.StateBlocked, Reason: protocol.ReasonWindow, Detail: "inside deny window", RebootRequired: true, LastCheck: testNow})
	if err := d.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := protocol.PublishArgs{State: "blocked", RebootRequired: true, LastCheck: testNow, Detail: "window: inside deny window",
		BlockedSince: testNow, BlockedReason: "window"}
	if got := publishArgs(t, w.child, 0); got != want {
		t.Errorf("args %+v, want %+v", got, want)
	}
	if v := d.View(); len(v.Nodes) != 1 || v.Nodes[0].Node != "node-b" {
		t.Errorf("view %+v", v)
	}
	w.child.answers[protocol.StepPublish] = answer{code: exitcode.EtcdUnavailable, json: `{"exit_code":7,"error":"etcd down"}`}
	if err := d.Publish(context.Background()); exitcode.CodeOf(err) != exitcode.EtcdUnavailable {
		t.Errorf("err %v", err)
	}
	w.child.answers[protocol.StepPublish] = answer{code: exitcode.Internal, err: errors.New("no JSON")}
	if err := d.Publish(context.Background()); exitcode.CodeOf(err) != exitcode.Internal {
		t.Errorf("err %v", err)
	}
}

// An idle publication reads the pause key only: it keeps the last view and
// its age, and the pause it returns stops the next cycle at step 1. A
// decision that uses the view (a policy, the health script's CLUSTER_SIZE,
// before the lock or after a reboot) reads it again, with --read-view, when
// it is older than one publish interval; nothing else does.
func TestViewReadOnlyWhenUsed(t *testing.T) {
	const withView = `{"tool":"crd-lock","exit_code":0,"view":{"nodes":[{"node":"node-a","state":"needs_reboot"},{"node":"node-c","state":"idle"}],"rebooting":[],"read_at":"2026-11-29T02:59:00Z"}}`
	const withSummary = `{"tool":"crd-lock","exit_code":0,"summary":{"cluster_size":2,"healthy_others":1,"fallback_up":[],"read_at":"2026-11-29T02:59:00Z"}}`
	old := policy.View{Nodes: []policy.NodeRecord{{Node: "node-b", State: policy.StateIdle}}, ReadAt: testNow.Add(-10 * time.Minute)}
	t.Run("idle publication: pause only", func(t *testing.T) {
		w := newWorld(t)
		w.child.answers[protocol.StepPublish] = answer{json: `{"tool":"crd-lock","exit_code":0,"paused":{"v":1,"reason":"incident 9","by":"bob","since":"2026-11-29T02:00:00Z"}}`}
		d := newDriver(t, w, testConfig(w), nil)
		d.SetView(old)
		if err := d.Publish(context.Background()); err != nil {
			t.Fatal(err)
		}
		if publishArgs(t, w.child, 0).ReadView {
			t.Errorf("idle publication asked for the view: %+v", w.child.args[0])
		}
		v := d.View()
		if len(v.Nodes) != 1 || v.Nodes[0].Node != "node-b" || !v.ReadAt.Equal(old.ReadAt) || v.Paused == nil || v.Paused.Reason != "incident 9" {
			t.Errorf("view after an idle publication = %+v; want the last view with the pause", v)
		}
		if !d.PublishedAt().Equal(testNow) {
			t.Errorf("PublishedAt %v", d.PublishedAt())
		}
		if out := d.RunOnce(context.Background(), Mode{}); out.Reason != protocol.ReasonPaused || out.Step != 1 {
			t.Errorf("cycle after the pause was seen: %s/%s step %d", out.Action, out.Reason, out.Step)
		}
		w.child.answers[protocol.StepPublish] = answer{json: `{"tool":"crd-lock","exit_code":0}`}
		if err := d.Publish(context.Background()); err != nil || d.View().Paused != nil {
			t.Errorf("a publication without a pause left %+v (%v)", d.View().Paused, err)
		}
	})
	for _, tt := range []struct {
		name      string
		policies  bool
		script    string
		viewAge   time.Duration
		readsView bool
	}{
		{"policy, stale view", true, "", 2 * time.Minute, true},
		{"health script, stale view", false, "/bin/true", 2 * time.Minute, true},
		{"policy and script, fresh view", true, "/bin/true", 30 * time.Second, false},
		{"neither: the view is not used", false, "", time.Hour, false},
	} {
		t.Run("before the lock: "+tt.name, func(t *testing.T) {
			w := newWorld(t)
			cfg := testConfig(w)
			cfg.HealthScript = tt.script
			if tt.policies {
				cfg.ClusterPolicies.MinHealthyAbsolute = 1
			}
			w.child.answers[protocol.StepPublish] = answer{json: withSummary}
			w.child.answers[protocol.StepCycle] = answer{json: dryRunJSON}
			d := newDriver(t, w, cfg, nil)
			d.SetView(policy.View{Nodes: []policy.NodeRecord{{Node: "node-b", State: policy.StateIdle}}, ReadAt: testNow.Add(-tt.viewAge)})
			out := d.RunOnce(context.Background(), Mode{})
			want := []string{protocol.StepCycle}
			if tt.readsView {
				want = []string{protocol.StepPublish, protocol.StepCycle}
			}
			if !slices.Equal(w.child.steps(), want) {
				t.Fatalf("child steps %v, want %v (%s/%s: %s)", w.child.steps(), want, out.Action, out.Reason, out.Detail)
			}
			if tt.readsView {
				if a := publishArgs(t, w.child, 0); !a.ReadSummary || a.ReadView {
					t.Errorf("refresh without read_summary, or with the whole view: %+v", a)
				}
				if got := w.gate.sums[0]; got.ClusterSize != 2 {
					t.Errorf("the gate saw %+v, want the summary just read (2 nodes)", got)
				}
			}
		})
	}
	t.Run("simulate reads the view without writing the record", func(t *testing.T) {
		w := newWorld(t)
		w.child.answers[protocol.StepStatus] = answer{json: withView}
		w.child.answers[protocol.StepCycle] = answer{json: dryRunJSON}
		d := newDriver(t, w, testConfig(w), nil)
		d.SetView(policy.View{})
		d.RunOnce(context.Background(), Mode{Simulate: true})
		if got := w.child.steps(); !slices.Equal(got, []string{protocol.StepStatus, protocol.StepCycle}) {
			t.Fatalf("child steps %v, want status (no publication), then cycle", got)
		}
		if len(w.gate.sums) != 1 || w.gate.sums[0].ClusterSize != 2 {
			t.Errorf("pre-lock gate saw %+v, want the view status read (node-a and node-c)", w.gate.sums)
		}
	})
	t.Run("after a reboot: the gate's CLUSTER_SIZE", func(t *testing.T) {
		w := newWorld(t)
		writeMarker(t, w, "boot-1", testNow.Add(-5*time.Minute))
		w.detect.required = false
		w.child.answers[protocol.StepPublish] = answer{json: withSummary}
		d := newDriver(t, w, testConfig(w), nil)
		d.SetView(policy.View{})
		d.RunOnce(context.Background(), Mode{})
		if steps := w.child.steps(); len(steps) == 0 || steps[0] != protocol.StepPublish || !publishArgs(t, w.child, 0).ReadSummary {
			t.Fatalf("child steps %v %+v, want a publication with read_summary first", steps, w.child.args)
		}
		if len(w.gate.phases) != 1 || w.gate.phases[0] != "post-reboot" || w.gate.sums[0].ClusterSize != 2 {
			t.Errorf("post-reboot gate: phases %v, summary %+v", w.gate.phases, w.gate.sums)
		}
	})
}

// Identical blocked messages are logged once, then summarised.
func TestOutcomeLogRateLimited(t *testing.T) {
	w := newWorld(t)
	w.windows.open = false
	var logs bytes.Buffer
	d := newDriver(t, w, testConfig(w), &logs)
	for i := 0; i < 5; i++ {
		d.RunOnce(context.Background(), Mode{})
		w.now = w.now.Add(time.Minute)
	}
	if n := strings.Count(logs.String(), `"event":"cycle"`); n != 1 {
		t.Fatalf("%d cycle lines in 5 minutes:\n%s", n, logs.String())
	}
	w.now = w.now.Add(10 * time.Minute)
	d.RunOnce(context.Background(), Mode{})
	if !strings.Contains(logs.String(), `"repeated":5`) {
		t.Fatalf("no summary:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"node":"node-a"`) || !strings.Contains(logs.String(), `"reason":"window"`) {
		t.Errorf("fields missing:\n%s", logs.String())
	}
}

// simulate asks the child not to wait in line; run and the daemon do wait.
func TestSimulateDoesNotWait(t *testing.T) {
	for _, mode := range []Mode{{Simulate: true}, {}} {
		w := newWorld(t)
		cfg := testConfig(w)
		cfg.DryRun = true
		d := newDriver(t, w, cfg, nil)
		d.RunOnce(context.Background(), mode)
		w.child.mu.Lock()
		var args protocol.CycleArgs
		for i, step := range w.child.calls {
			if step == protocol.StepCycle {
				args = w.child.args[i].(protocol.CycleArgs)
			}
		}
		w.child.mu.Unlock()
		if args.NoWait != mode.Simulate {
			t.Errorf("simulate %v: cycle args %+v", mode.Simulate, args)
		}
	}
}

// A health check stopped by SIGTERM is no answer of the script: the cycle
// says interrupted and the health-check counter does not count it unhealthy.
func TestHealthCheckInterruptedNotCounted(t *testing.T) {
	w := newWorld(t)
	w.gate.unhealthy["pre-lock"] = true
	d := newDriver(t, w, testConfig(w), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := d.RunOnce(ctx, Mode{})
	if out.Reason != protocol.ReasonInterrupted || out.Step != 4 {
		t.Fatalf("out %s step %d: %s", out.Reason, out.Step, out.Detail)
	}
	if got := d.metrics.HealthChecks.Value("unhealthy"); got != 0 {
		t.Errorf("health_checks{unhealthy} = %v after an interrupted check, want 0", got)
	}
}

// While the kill switch or a pause holds every node, the detectors still run:
// status keeps telling which nodes need a reboot.
func TestKillSwitchKeepsRebootRequiredCurrent(t *testing.T) {
	w := newWorld(t)
	d := newDriver(t, w, testConfig(w), nil)
	w.setKill(true)
	for _, need := range []bool{true, false, true} {
		w.detect.set(need)
		out := d.RunOnce(context.Background(), Mode{})
		if out.Reason != protocol.ReasonKillSwitch {
			t.Fatalf("out %s: %s", out.Reason, out.Detail)
		}
		if st := d.Status(); st.RebootRequired != need || st.State != policy.StateBlocked {
			t.Errorf("need %v: status %+v", need, st)
		}
	}
}

// An idle publication carries this node's hold and request (not the whole
// view): they replace the ones the last view had for this node, and leave
// the other nodes' as they were.
func TestPublishedKeepsThisNodesOverrides(t *testing.T) {
	w := newWorld(t)
	cfg := testConfig(w)
	d := newDriver(t, w, cfg, nil)
	other := policy.Override{Node: "node-x", Pause: policy.Pause{Reason: "x"}}
	d.SetView(policy.View{Holds: []policy.Override{other}})
	mine := &policy.Override{Node: cfg.NodeName, Pause: policy.Pause{Reason: "leak", By: "ops"}}
	d.published(protocol.PublishResult{Request: mine, Hold: mine}, testNow)
	if r := d.View().Requested(cfg.NodeName); r == nil || r.Reason != "leak" {
		t.Errorf("request after publish = %v", r)
	}
	if h := d.View().Held("node-x"); h == nil {
		t.Error("another node's hold was dropped")
	}
	d.published(protocol.PublishResult{}, testNow)
	if d.View().Requested(cfg.NodeName) != nil || d.View().Held(cfg.NodeName) != nil {
		t.Error("a request or hold that is gone from etcd stays in the view")
	}
}
