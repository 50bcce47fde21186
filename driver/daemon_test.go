package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/logging"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

func TestLimiter(t *testing.T) {
	now := testNow
	l := NewLimiter(func() time.Time { return now }, 10*time.Minute)
	step := func(key string, wantEmit bool, wantRepeated int) {
		t.Helper()
		emit, rep := l.Observe(key)
		if emit != wantEmit || rep != wantRepeated {
			t.Fatalf("%s at %s: emit %v repeated %d, want %v %d", key, now.Format("15:04"), emit, rep, wantEmit, wantRepeated)
		}
	}
	step("a", true, 0)
	now = now.Add(time.Minute)
	step("a", false, 0)
	now = now.Add(time.Minute)
	step("a", false, 0)
	now = now.Add(9 * time.Minute)
	step("a", true, 3)
	step("a", false, 0)
	step("b", true, 0)
	step("a", true, 0)
	off := NewLimiter(nil, 0)
	if e, _ := off.Observe("x"); !e {
		t.Error("disabled limiter held back")
	}
	if e, _ := off.Observe("x"); !e {
		t.Error("disabled limiter held back")
	}
}

func TestJitterAndBackoff(t *testing.T) {
	if got := Jitter(time.Minute, 0); got != 54*time.Second {
		t.Errorf("low %v", got)
	}
	if got := Jitter(time.Minute, 0.999999); got < 65*time.Second || got > 66*time.Second {
		t.Errorf("high %v", got)
	}
	cfg := config.Default() // 5..60 s
	tests := []struct {
		attempt int
		r       float64
		want    time.Duration
	}{
		{1, 0.9, 5 * time.Second},
		{2, 1, 10 * time.Second},
		{3, 1, 20 * time.Second},
		{3, 0, 5 * time.Second},
		{10, 1, 60 * time.Second},
		{1000, 0.5, 32500 * time.Millisecond},
		{0, 1, 5 * time.Second},
	}
	for _, tt := range tests {
		if got := Backoff(cfg, tt.attempt, tt.r); got != tt.want {
			t.Errorf("Backoff(attempt %d, r %v) = %v, want %v", tt.attempt, tt.r, got, tt.want)
		}
	}
}

func TestActors(t *testing.T) {
	var g Actors
	if err := g.Run(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var interrupted []int
	var mu sync.Mutex
	g.Add(func() error { <-stop; return nil }, func(error) { mu.Lock(); interrupted = append(interrupted, 1); mu.Unlock(); close(stop) })
	g.Add(func() error { return errors.New("first") }, func(error) { mu.Lock(); interrupted = append(interrupted, 2); mu.Unlock() })
	if err := g.Run(); err == nil || err.Error() != "first" {
		t.Fatalf("err %v", err)
	}
	if len(interrupted) != 2 {
		t.Errorf("interrupted %v", interrupted)
	}
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "crd-lock")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExecChild(t *testing.T) {
	cfg := config.Default()
	cfg.NodeName = "node-a"
	t.Run("answer, code, stdin and args", func(t *testing.T) {
		dir := t.TempDir()
		p := writeScript(t, `fds=$(readlink /proc/$$/fd/0 /proc/$$/fd/1); echo "$fds" > "`+dir+`/fds"; cat > "`+dir+`/stdin"; echo "$*" > "`+dir+`/args"; echo 'log line' >&2; echo 'noise'; echo '{"exit_code":4,"outcome":"blocked","reason":"lock_busy"}'; exit 4`)
		var stderr bytes.Buffer
		var res protocol.CycleResult
		code, err := ExecChild{Path: p, Stderr: &stderr, Root: "/r", LogFormat: "text"}.Run(context.Background(), protocol.StepCycle, protocol.CycleArgs{Attempt: 2}, cfg, &res)
		if err != nil || code != exitcode.LockBusy || res.Reason != protocol.ReasonLockBusy {
			t.Fatalf("code %v err %v res %+v", code, err, res)
		}
		args, _ := os.ReadFile(dir + "/args")
		stdin, _ := os.ReadFile(dir + "/stdin")
		if string(args) != "step cycle\n" || stderr.String() != "log line\n" {
			t.Errorf("args %q stderr %q", args, stderr.String())
		}
		// One request: the step, its arguments, the configuration (under
		// its YAML names), the daemon's root and log format.
		var req protocol.Request
		if err := json.Unmarshal(stdin, &req); err != nil || req.Check(protocol.StepCycle) != nil || req.Config == nil || req.Config.NodeName != "node-a" ||
			string(req.Args) != `{"attempt":2}` || req.Root != "/r" || req.LogFormat != "text" || !strings.Contains(string(stdin), `"node_name":"node-a"`) {
			t.Errorf("the child's stdin is not the request: %v %q", err, stdin)
		}
		// In-memory files, not pipes: no copying goroutines in the daemon.
		if fds, _ := os.ReadFile(dir + "/fds"); !strings.Contains(string(fds), "memfd:crd-request") || !strings.Contains(string(fds), "memfd:crd-result") {
			t.Errorf("child's stdin/stdout: %q, want the daemon's memfds", fds)
		}
	})
	t.Run("the journal's stream is inherited, not piped", func(t *testing.T) {
		f, err := os.Create(filepath.Join(t.TempDir(), "journal"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		p := writeScript(t, `readlink /proc/$$/fd/2 >&2; echo '{"view":{}}'`)
		if _, err := (ExecChild{Path: p, Stderr: logging.Journal{W: f}}).Run(context.Background(), protocol.StepPublish, nil, cfg, &protocol.PublishResult{}); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(f.Name()); string(got) != f.Name()+"\n" {
			t.Errorf("child's stderr is %q, want the daemon's own %s (JOURNAL_STREAM must match in the child)", got, f.Name())
		}
	})
	t.Run("no JSON", func(t *testing.T) {
		p := writeScript(t, `exit 7`)
		code, err := ExecChild{Path: p}.Run(context.Background(), protocol.StepPublish, nil, cfg, &protocol.PublishResult{})
		if err == nil || code != exitcode.EtcdUnavailable {
			t.Fatalf("code %v err %v", code, err)
		}
		p = writeScript(t, `echo not json`)
		if code, err := (ExecChild{Path: p}).Run(context.Background(), protocol.StepPublish, nil, cfg, nil); err == nil || code != exitcode.Internal {
			t.Fatalf("code %v err %v", code, err)
		}
	})
	t.Run("cannot start", func(t *testing.T) {
		if _, err := (ExecChild{Path: "/nonexistent/crd-lock"}).Run(context.Background(), protocol.StepStatus, nil, cfg, nil); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("SIGTERM on cancel, then its answer", func(t *testing.T) {
		dir := t.TempDir()
		p := writeScript(t, `trap 'echo "{\"exit_code\":130,\"outcome\":\"blocked\",\"reason\":\"interrupted\"}"; exit 130' TERM
touch "`+dir+`/started"
while :; do sleep 0.01; done`)
		ctx, cancel := context.WithCancel(context.Background())
		go cancelWhenExists(dir+"/started", cancel)
		var res protocol.CycleResult
		code, err := ExecChild{Path: p}.Run(ctx, protocol.StepCycle, nil, cfg, &res)
		if err != nil || code != exitcode.Interrupted || res.Reason != protocol.ReasonInterrupted {
			t.Fatalf("code %v err %v res %+v", code, err, res)
		}
	})
	t.Run("killed after the grace period", func(t *testing.T) {
		dir := t.TempDir()
		p := writeScript(t, `trap '' TERM
touch "`+dir+`/started"
while :; do sleep 0.01; done`)
		ctx, cancel := context.WithCancel(context.Background())
		go cancelWhenExists(dir+"/started", cancel)
		code, err := ExecChild{Path: p, Grace: 50 * time.Millisecond}.Run(ctx, protocol.StepCycle, nil, cfg, nil)
		if err == nil || code != exitcode.Interrupted {
			t.Fatalf("code %v err %v", code, err)
		}
	})
}

// cancelWhenExists calls cancel once path exists (a child script touches it
// when it has started).
func cancelWhenExists(path string, cancel context.CancelFunc) {
	for {
		if _, err := os.Stat(path); err == nil {
			cancel()
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type fakeSystemd struct {
	mu    sync.Mutex
	lines []string
}

func (f *fakeSystemd) add(s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lines = append(f.lines, s)
	return nil
}
func (f *fakeSystemd) Ready(s string) error    { return f.add("READY " + s) }
func (f *fakeSystemd) Status(s string) error   { return f.add("STATUS " + s) }
func (f *fakeSystemd) Watchdog() error         { return f.add("WATCHDOG") }
func (f *fakeSystemd) Stopping(s string) error { return f.add("STOPPING " + s) }
func (f *fakeSystemd) all() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.lines, "\n")
}

// The daemon runs cycles, publishes, notifies systemd, writes metrics,
// reloads on request and stops when its context ends.
func TestDaemon(t *testing.T) {
	w := newWorld(t)
	w.windows.open = false
	cfg := testConfig(w)
	cfg.CheckIntervalSec = 1
	cfg.Metrics.Textfile = filepath.Join(t.TempDir(), "crd.prom")
	var logs testsupport.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	m := NewMetrics("test")
	drv := New(cfg, w.deps(), log, m, nil)
	reload := make(chan struct{}, 1)
	n := &fakeSystemd{}
	loads := 0
	d := &Daemon{Driver: drv, Log: log, Systemd: n, WatchdogEvery: 10 * time.Millisecond, Reload: reload, Metrics: m,
		LoadConfig: func() (config.Config, error) {
			loads++
			if loads == 1 {
				return config.Config{}, exitcode.Errorf(exitcode.Config, "config x: line 3: bad")
			}
			next := cfg
			next.NodeName = "renamed"
			next.Windows.Deny = []string{"Sat 00:00-24:00"}
			return next, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	testsupport.Eventually(t, 10*time.Second, "a cycle and a watchdog ping", func() bool { return d.Cycles() >= 1 && strings.Contains(n.all(), "WATCHDOG") })
	reload <- struct{}{}
	testsupport.Eventually(t, 10*time.Second, "reload_failed logged", func() bool { return strings.Contains(logs.String(), "reload_failed") })
	reload <- struct{}{}
	testsupport.Eventually(t, 10*time.Second, "reloaded logged", func() bool { return strings.Contains(logs.String(), `"event":"reloaded"`) })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := drv.Config()
	if got.NodeName != "node-a" || len(got.Windows.Deny) != 1 {
		t.Errorf("after reload: node %q deny %v", got.NodeName, got.Windows.Deny)
	}
	for _, want := range []string{"READY", "STATUS blocked (window)", "WATCHDOG", "STOPPING"} {
		if !strings.Contains(n.all(), want) {
			t.Errorf("notifications lack %q:\n%s", want, n.all())
		}
	}
	for _, want := range []string{`"event":"started"`, `"event":"reload_restart_only"`, `"fields":"node_name"`, `"event":"stopped"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
	prom, err := os.ReadFile(cfg.Metrics.Textfile)
	if err != nil || !strings.Contains(string(prom), `clusterrebootd_reboot_blocked_total{reason="window"}`) {
		t.Errorf("textfile %s %v", prom, err)
	}
	if !slicesContains(w.child.steps(), protocol.StepPublish) {
		t.Errorf("never published: %v", w.child.steps())
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// The publisher publishes right after a cycle when at least half an interval
// has passed since the last publication, so an idle node has one burst of
// activity per cycle instead of two; after a recent one it waits for its own
// timer.
func TestPublishFollowsCycle(t *testing.T) {
	for _, tt := range []struct {
		name     string
		tick     time.Duration // the driver's clock advances this much at each reading
		atLeast  int
		atMost   int
		interval int
	}{
		{"last publication long ago: publish after every cycle", time.Hour, 4, 1000, 3600},
		{"recent publication: no publish until the timer", 0, 1, 2, 3600},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.detect.required = false
			cfg := testConfig(w)
			cfg.CheckIntervalSec = 1
			cfg.HealthPublishIntervalSec = tt.interval
			w.child.answers[protocol.StepPublish] = answer{json: `{"tool":"crd-lock","exit_code":0}`}
			deps := w.deps()
			var readings atomic.Int64
			deps.Now = func() time.Time { return testNow.Add(time.Duration(readings.Add(1)) * tt.tick) }
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			var trims atomic.Int64
			d := &Daemon{Driver: New(cfg, deps, log, nil, nil), Log: log, MemTrim: func() { trims.Add(1) }}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- d.Run(ctx) }()
			testsupport.Eventually(t, 10*time.Second, "four cycles", func() bool { return d.Cycles() >= 4 })
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			// One trim (a garbage collection) per burst: a cycle and the
			// publication that follows it share one; the first publication,
			// on the timer at start, and a cycle cut short by cancel may add one each.
			if got, c := trims.Load(), int64(d.Cycles()); got < c-1 || got > c+2 {
				t.Errorf("%d trims for %d cycles, want one per cycle (±)", got, c)
			}
			n := 0
			w.child.mu.Lock()
			for _, c := range w.child.calls {
				if c == protocol.StepPublish {
					n++
				}
			}
			w.child.mu.Unlock()
			if n < tt.atLeast || n > tt.atMost {
				t.Errorf("%d publications after %d cycles, want %d..%d", n, d.Cycles(), tt.atLeast, tt.atMost)
			}
		})
	}
}

// A publication that keeps failing is logged once (then summarised), not at
// every attempt, and its recovery is logged once.
func TestPublishFailureRateLimited(t *testing.T) {
	w := newWorld(t)
	w.detect.required = false
	cfg := testConfig(w)
	cfg.CheckIntervalSec = 1
	cfg.HealthPublishIntervalSec = 1
	w.child.answers[protocol.StepPublish] = answer{code: exitcode.EtcdUnavailable, json: `{"tool":"crd-lock","exit_code":7,"error":"etcd: timeout at http://127.0.0.1:2379"}`}
	var logs testsupport.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	m := NewMetrics("test")
	d := &Daemon{Driver: New(cfg, w.deps(), log, m, nil), Log: log, Metrics: m}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	publishes := func() int {
		w.child.mu.Lock()
		defer w.child.mu.Unlock()
		n := 0
		for _, c := range w.child.calls {
			if c == protocol.StepPublish {
				n++
			}
		}
		return n
	}
	testsupport.Eventually(t, 10*time.Second, "four publications", func() bool { return publishes() >= 4 })
	if n := strings.Count(logs.String(), `"event":"publish_failed"`); n != 1 {
		t.Fatalf("%d publish_failed lines after %d failed publications, want 1:\n%s", n, publishes(), logs.String())
	}
	if v := m.PublishFailing.Value(); v != 1 {
		t.Errorf("clusterrebootd_publish_failing = %v while publications fail, want 1", v)
	}
	w.child.mu.Lock()
	w.child.answers[protocol.StepPublish] = answer{json: `{"tool":"crd-lock","exit_code":0,"view":{"nodes":[]}}`}
	w.child.mu.Unlock()
	testsupport.Eventually(t, 10*time.Second, "publish_recovered logged", func() bool { return strings.Contains(logs.String(), `"event":"publish_recovered"`) })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), `"event":"publish_recovered"`); n != 1 {
		t.Errorf("%d publish_recovered lines, want 1", n)
	}
	if v := m.PublishFailing.Value(); v != 0 {
		t.Errorf("clusterrebootd_publish_failing = %v after recovery, want 0", v)
	}
}

// A reload stops a running cluster step only when the step reads a field
// that changed.
func TestStepChanged(t *testing.T) {
	base := config.Default()
	base.NodeName = "n1"
	for _, tt := range []struct {
		name string
		edit func(c *config.Config)
		want bool
	}{
		{"nothing", func(c *config.Config) {}, false},
		{"metrics textfile", func(c *config.Config) { c.Metrics.Textfile = "/var/lib/node_exporter/crd.prom" }, false},
		{"intervals and backoff", func(c *config.Config) { c.CheckIntervalSec, c.BackoffMaxSec, c.HealthPublishIntervalSec = 30, 900, 120 }, false},
		{"post-reboot settings", func(c *config.Config) {
			c.PostRebootHooks = []config.Hook{{Name: "uncordon", Cmd: []string{"/bin/true"}}}
			c.SettleSec, c.MaxRebootsPerDay = 60, 5
		}, false},
		{"a deny window", func(c *config.Config) { c.Windows.Deny = []string{"Fri 00:00-23:59"} }, true},
		{"a pre-reboot hook", func(c *config.Config) { c.PreRebootHooks = []config.Hook{{Name: "drain", Cmd: []string{"/bin/true"}}} }, true},
		{"the kill switch file", func(c *config.Config) { c.KillSwitchFile = "/etc/other" }, true},
		{"the health script", func(c *config.Config) { c.HealthScript = "/usr/local/bin/check" }, true},
		{"a policy", func(c *config.Config) { c.ClusterPolicies.MinHealthyAbsolute = 2 }, true},
		{"dry run", func(c *config.Config) { c.DryRun = true }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			next := base
			tt.edit(&next)
			if got := stepChanged(base, next); got != tt.want {
				t.Errorf("stepChanged = %v, want %v", got, tt.want)
			}
		})
	}
}

// A metrics file that cannot be written is logged once, not on every write.
func TestMetricsErrorRateLimited(t *testing.T) {
	w := newWorld(t)
	cfg := testConfig(w)
	cfg.Metrics.Textfile = filepath.Join(t.TempDir(), "missing-dir", "crd.prom")
	var logs testsupport.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	d := &Daemon{Driver: New(cfg, w.deps(), log, nil, nil), Log: log, Metrics: NewMetrics("test")}
	for range 5 {
		d.writeMetrics()
	}
	if n := strings.Count(logs.String(), `"event":"metrics_error"`); n != 1 {
		t.Fatalf("%d metrics_error lines after 5 failed writes, want 1:\n%s", n, logs.String())
	}
}

// While the cycle child waits in line (for hours, in a long rollout),
// systemd's STATUS says "waiting", not the previous cycle's answer: the
// daemon tells it when the wait begins.
func TestStatusWaitingWhileTheChildWaits(t *testing.T) {
	w := newWorld(t)
	cfg := testConfig(w)
	w.child.answers[protocol.StepCycle] = answer{block: true}
	w.child.started = make(chan struct{})
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	n := &fakeSystemd{}
	d := &Daemon{Driver: New(cfg, w.deps(), log, nil, nil), Log: log, Systemd: n}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	<-w.child.started
	testsupport.Eventually(t, 10*time.Second, "STATUS waiting while the cycle child runs", func() bool {
		return strings.Contains(n.all(), "STATUS waiting")
	})
	if d.Cycles() != 0 {
		t.Errorf("a cycle ended: the status must come from a running one")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A reload that changes only what the running cluster step does not read
// leaves the step running; one that changes a window restarts it.
func TestReloadRestartsStepOnlyWhenItMatters(t *testing.T) {
	w := newWorld(t)
	cfg := testConfig(w)
	w.child.answers[protocol.StepCycle] = answer{block: true}
	w.child.started = make(chan struct{})
	var logs testsupport.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	reload := make(chan struct{}, 1)
	var next config.Config
	var mu sync.Mutex
	d := &Daemon{Driver: New(cfg, w.deps(), log, nil, nil), Log: log, Reload: reload,
		LoadConfig: func() (config.Config, error) { mu.Lock(); defer mu.Unlock(); return next, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	<-w.child.started
	set := func(c config.Config) { mu.Lock(); next = c; mu.Unlock(); reload <- struct{}{} }

	quiet := cfg
	quiet.Metrics.Textfile = filepath.Join(t.TempDir(), "crd.prom")
	quiet.CheckIntervalSec = 30
	set(quiet)
	testsupport.Eventually(t, 10*time.Second, "step_restarted false logged", func() bool { return strings.Contains(logs.String(), `"step_restarted":false`) })
	time.Sleep(50 * time.Millisecond)
	if strings.Contains(logs.String(), `"reason":"interrupted"`) {
		t.Fatalf("a reload of the metrics path stopped the cluster step:\n%s", logs.String())
	}
	deny := quiet
	deny.Windows.Deny = []string{"Sat 00:00-24:00"}
	set(deny)
	// The step is interrupted before the reloaded line is written: wait for both.
	testsupport.Eventually(t, 10*time.Second, "an interrupted step restarted", func() bool {
		l := logs.String()
		return strings.Contains(l, `"reason":"interrupted"`) && strings.Contains(l, `"step_restarted":true`)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// clusterrebootd_lock_holding tells holding from queuing: it is 1 only
// while a cycle step runs (state waiting) and has marked run_dir; a mark
// left by a step that died does not count once no step runs.
func TestLockHoldingMetric(t *testing.T) {
	w := newWorld(t)
	cfg := testConfig(w)
	cfg.Metrics.Textfile = filepath.Join(t.TempDir(), "crd.prom")
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	d := &Daemon{Driver: New(cfg, w.deps(), log, nil, nil), Log: log, Metrics: NewMetrics("test")}
	mark := filepath.Join(cfg.RunDir, protocol.LockHoldingFile)
	if err := os.MkdirAll(cfg.RunDir, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		state  string
		marked bool
		want   float64
	}{
		{"queued", policy.StateWaiting, false, 0},
		{"holding", policy.StateWaiting, true, 1},
		{"a dead step's mark, no step running", policy.StateNeedsReboot, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d.Driver.mu.Lock()
			d.Driver.status.State = tc.state
			d.Driver.mu.Unlock()
			_ = os.Remove(mark)
			if tc.marked {
				if err := os.WriteFile(mark, []byte("1\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			d.writeMetrics()
			if got := d.Metrics.LockHolding.Value(); got != tc.want {
				t.Errorf("clusterrebootd_lock_holding = %v, want %v", got, tc.want)
			}
		})
	}
}
