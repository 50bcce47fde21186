package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
)

func writeMarker(t *testing.T, w *world, bootID string, at time.Time) {
	t.Helper()
	if err := reboot.WriteMarker(w.stateDir, reboot.Marker{Version: 1, Node: "node-a", BootID: bootID, RequestedAt: at}); err != nil {
		t.Fatal(err)
	}
}

func TestPostReboot(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(t *testing.T, w *world, cfg *config.Config)
		mode       Mode
		reason     string // "" when the cycle went on to its normal end
		markerLeft bool
		children   []string
		hooks      int
		check      func(t *testing.T, w *world)
	}{
		{name: "completed: hooks, checks, settle, complete", setup: func(t *testing.T, w *world, cfg *config.Config) {
			writeMarker(t, w, "boot-1", testNow.Add(-5*time.Minute))
			cfg.SettleSec = 30
			cfg.PostRebootHooks = []config.Hook{{Name: "uncordon", Cmd: []string{"/bin/true"}}}
			w.detect.required = false
			w.child.answers[protocol.StepComplete] = answer{json: `{"exit_code":0,"freed":true}`}
		}, children: []string{`complete {"keep":true}`, `complete {"keep":true}`, "complete"}, hooks: 1, check: func(t *testing.T, w *world) {
			if len(w.slept) != 1 || w.slept[0] != 30*time.Second {
				t.Errorf("slept %v", w.slept)
			}
			b, err := os.ReadFile(filepath.Join(w.runDir, LastRebootFile))
			if err != nil || strings.TrimSpace(string(b)) != "2026-11-29T02:59:00Z" {
				t.Errorf("last-reboot %q %v", b, err)
			}
			h, _ := ReadHistory(w.stateDir)
			if len(h.Reboots) != 1 || !h.Reboots[0].Rebooted || h.Reboots[0].BootID != "boot-1" {
				t.Errorf("history %+v", h)
			}
			if w.gate.phases[0] != "post-reboot" {
				t.Errorf("gate phases %v", w.gate.phases)
			}
		}},
		{name: "post-reboot gate fails: slot kept", setup: func(t *testing.T, w *world, cfg *config.Config) {
			writeMarker(t, w, "boot-1", testNow.Add(-5*time.Minute))
			w.gate.unhealthy["post-reboot"] = true
			w.detect.required = false
		}, reason: protocol.ReasonPostReboot, markerLeft: true, children: []string{`complete {"keep":true}`}},
		{name: "hook fails", setup: func(t *testing.T, w *world, cfg *config.Config) {
			writeMarker(t, w, "boot-1", testNow.Add(-5*time.Minute))
			cfg.PostRebootHooks = []config.Hook{{Name: "x", Cmd: []string{"/bin/false"}}}
			w.hooks.err = exitcode.Errorf(exitcode.RebootFailed, "hook x exited 1")
		}, reason: protocol.ReasonPostReboot, markerLeft: true, hooks: 1, children: []string{`complete {"keep":true}`, `complete {"keep":true}`}},
		{name: "history cannot be written: post_reboot, not reboot_loop", setup: func(t *testing.T, w *world, cfg *config.Config) {
			writeMarker(t, w, "boot-1", testNow.Add(-5*time.Minute))
			w.detect.required = false
			if err := os.MkdirAll(HistoryPath(w.stateDir), 0o755); err != nil { // a directory: every write fails
				t.Fatal(err)
			}
		}, reason: protocol.ReasonPostReboot, markerLeft: true, children: []string{`complete {"keep":true}`}, check: func(t *testing.T, w *world) {
			if h, err := ReadHistory(w.stateDir); err == nil {
				t.Errorf("history readable: %+v", h)
			}
		}},
		{name: "dry run skips hooks", setup: func(t *testing.T, w *world, cfg *config.Config) {
			writeMarker(t, w, "boot-1", testNow.Add(-5*time.Minute))
			cfg.DryRun = true
			cfg.PostRebootHooks = []config.Hook{{Name: "x", Cmd: []string{"/bin/false"}}}
			w.detect.required = false
		}, children: []string{protocol.StepComplete}},
		{name: "complete fails: retried later", setup: func(t *testing.T, w *world, cfg *config.Config) {
			writeMarker(t, w, "boot-1", testNow.Add(-5*time.Minute))
			w.detect.required = false
			w.child.answers[protocol.StepComplete] = answer{code: exitcode.EtcdUnavailable, json: `{"exit_code":7,"error":"etcd down"}`}
		}, reason: protocol.ReasonEtcd, markerLeft: true, children: []string{protocol.StepComplete}},
		{name: "still needed after the reboot: reboot_loop", setup: func(t *testing.T, w *world, cfg *config.Config) {
			writeMarker(t, w, "boot-1", testNow.Add(-5*time.Minute))
		}, reason: protocol.ReasonRebootLoop, markerLeft: true, children: []string{
			// A reboot loop is a failure of the rollout: recorded once, when
			// the loop is found.
			`failure {"kind":"reboot_loop","detail":"the node still needs a reboot after the coordinated reboot requested at 2026-11-29T02:54:00Z","since":"2026-11-29T02:59:00Z"}`,
			`complete {"keep":true}`}, check: func(t *testing.T, w *world) {
			if h, _ := ReadHistory(w.stateDir); h.Block == nil {
				t.Error("no block recorded")
			}
		}},
		{name: "reboot in progress", setup: func(t *testing.T, w *world, cfg *config.Config) {
			writeMarker(t, w, "boot-2", testNow.Add(-time.Minute))
		}, reason: protocol.ReasonRebootInProgress, markerLeft: true},
		{name: "reboot that never happened", setup: func(t *testing.T, w *world, cfg *config.Config) {
			writeMarker(t, w, "boot-2", testNow.Add(-time.Hour))
			w.detect.required = false
		}, children: []string{
			// A failure of the rollout: the command did not take the node down.
			`failure {"kind":"reboot_command","detail":"its reboot command () ran at 2026-11-29T01:59:00Z, but the machine did not go down within reboot_slot_ttl_sec (1800 s)","since":"2026-11-29T01:59:00Z"}`},
			check: func(t *testing.T, w *world) {
				h, _ := ReadHistory(w.stateDir)
				if len(h.Reboots) != 1 || h.Reboots[0].Rebooted {
					t.Errorf("history %+v", h)
				}
			}},
		{name: "simulate changes nothing", mode: Mode{Simulate: true}, setup: func(t *testing.T, w *world, cfg *config.Config) {
			writeMarker(t, w, "boot-1", testNow.Add(-5*time.Minute))
			cfg.PostRebootHooks = []config.Hook{{Name: "x", Cmd: []string{"/bin/true"}}}
			w.detect.required = false
		}, markerLeft: true, check: func(t *testing.T, w *world) {
			if _, err := os.Stat(HistoryPath(w.stateDir)); err == nil {
				t.Error("simulate wrote the history")
			}
		}},
		{name: "corrupt marker", setup: func(t *testing.T, w *world, cfg *config.Config) {
			if err := os.MkdirAll(w.stateDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(reboot.MarkerPath(w.stateDir), []byte("{"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, reason: protocol.ReasonPostReboot, markerLeft: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			cfg := testConfig(w)
			tt.setup(t, w, &cfg)
			d := newDriver(t, w, cfg, nil)
			out := d.RunOnce(context.Background(), tt.mode)
			if tt.reason != "" && (out.Reason != tt.reason || out.Step != 0) {
				t.Fatalf("got %s/%s step %d: %s", out.Action, out.Reason, out.Step, out.Detail)
			}
			if tt.reason == "" && out.Step == 0 {
				t.Fatalf("stopped at step 0: %s %s", out.Reason, out.Detail)
			}
			_, err := os.Stat(reboot.MarkerPath(w.stateDir))
			if left := err == nil; left != tt.markerLeft {
				t.Errorf("marker left %v, want %v", left, tt.markerLeft)
			}
			// Each child step with its arguments as the request carries
			// them: complete {"keep":true} renews the slot before the hooks
			// and the settle wait, and while blocked.
			var got []string
			for i, step := range w.child.steps() {
				got = append(got, strings.TrimSpace(step+" "+wireArgs(t, w.child.args[i])))
			}
			if !slices.Equal(got, tt.children) {
				t.Errorf("child steps %q, want %q", got, tt.children)
			}
			if w.hooks.calls != tt.hooks {
				t.Errorf("hooks ran %d times, want %d", w.hooks.calls, tt.hooks)
			}
			if tt.check != nil {
				tt.check(t, w)
			}
		})
	}
}

// The operator's request a reboot carried out is consumed by complete; the
// rest of the same cycle must not read it (from the view cached before the
// reboot) as a request for another one. A request of another revision (asked
// again since) stays.
func TestPostRebootForgetsTheRequestItCarriedOut(t *testing.T) {
	for _, tt := range []struct {
		name     string
		rev      int64
		wantIdle bool
	}{{"the request carried out", 7, true}, {"a newer request", 9, false}} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			cfg := testConfig(w)
			m := reboot.Marker{Version: 1, Node: "node-a", BootID: "boot-1", RequestedAt: testNow.Add(-5 * time.Minute),
				Extra: map[string]string{protocol.MarkerRequestRevision: "7"}}
			if err := reboot.WriteMarker(w.stateDir, m); err != nil {
				t.Fatal(err)
			}
			w.detect.required = false
			w.child.answers[protocol.StepComplete] = answer{json: `{"exit_code":0,"freed":true}`}
			d := newDriver(t, w, cfg, nil)
			// The publication before the cycle read the request.
			d.published(protocol.PublishResult{Request: &policy.Override{Node: "node-a", Revision: tt.rev, Pause: policy.Pause{By: "op", Reason: "r", Since: testNow.Add(-10 * time.Minute)}}}, testNow)
			out := d.RunOnce(context.Background(), Mode{})
			if idle := out.Reason == protocol.ReasonNotNeeded && out.Step == 2; idle != tt.wantIdle {
				t.Fatalf("got %s/%s step %d: %s %+v", out.Action, out.Reason, out.Step, out.Detail, out.Steps)
			}
		})
	}
}

// A retry after a failed gate does not run the hooks or count the reboot again.
func TestPostRebootRetry(t *testing.T) {
	w := newWorld(t)
	cfg := testConfig(w)
	cfg.PostRebootHooks = []config.Hook{{Name: "x", Cmd: []string{"/bin/true"}}}
	writeMarker(t, w, "boot-1", testNow.Add(-5*time.Minute))
	w.detect.required = false
	w.gate.unhealthy["post-reboot"] = true
	d := newDriver(t, w, cfg, nil)
	d.RunOnce(context.Background(), Mode{})
	w.gate.unhealthy["post-reboot"] = false
	out := d.RunOnce(context.Background(), Mode{})
	if out.Step == 0 || w.hooks.calls != 1 {
		t.Fatalf("out %+v hooks %d", out, w.hooks.calls)
	}
	if h, _ := ReadHistory(w.stateDir); len(h.Reboots) != 1 {
		t.Errorf("history %+v", h)
	}
}

func TestHistory(t *testing.T) {
	dir := t.TempDir()
	h, err := ReadHistory(dir)
	if err != nil || len(h.Reboots) != 0 {
		t.Fatal(h, err)
	}
	h.Add(HistoryEntry{At: testNow.Add(-8 * 24 * time.Hour), BootID: "old"}, testNow)
	if !h.Add(HistoryEntry{At: testNow.Add(-2 * time.Hour), BootID: "a"}, testNow) || h.Add(HistoryEntry{At: testNow.Add(-2 * time.Hour), BootID: "a"}, testNow) {
		t.Error("dedup")
	}
	if len(h.Reboots) != 1 || h.InLastDay(testNow) != 1 {
		t.Errorf("%+v", h)
	}
	if err := WriteHistory(dir, h); err != nil {
		t.Fatal(err)
	}
	if had, err := ClearLoop(dir); had || err != nil {
		t.Errorf("had %v err %v", had, err)
	}
	if err := os.WriteFile(HistoryPath(dir), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHistory(dir); err == nil || !strings.Contains(err.Error(), "fix or delete") {
		t.Errorf("err %v", err)
	}
	if had, err := ClearLoop(dir); !had || err != nil {
		t.Errorf("had %v err %v", had, err)
	}
	if err := WriteFileAtomic(filepath.Join(HistoryPath(dir), "x"), nil, 0o644); err == nil {
		t.Error("writing below a file worked")
	}
}

// A max_reboots_per_day above the history's size must still be enforced: the
// cap never drops an entry of the last 24 hours.
func TestHistoryKeepsTheLastDay(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var h History
	for i := 0; i < 30; i++ { // old entries, 2-6 days ago
		h.Add(HistoryEntry{BootID: fmt.Sprintf("old-%d", i), At: now.Add(-48*time.Hour - time.Duration(i)*time.Hour)}, now)
	}
	for i := 150; i > 0; i-- { // 150 reboots in the last day, oldest first
		h.Add(HistoryEntry{BootID: fmt.Sprintf("b-%d", i), At: now.Add(-time.Duration(i) * time.Minute)}, now)
	}
	if got := h.InLastDay(now); got != 150 {
		t.Fatalf("InLastDay = %d, want 150: entries of the last day were dropped", got)
	}
	for i := 0; i < 10; i++ {
		h.Add(HistoryEntry{BootID: fmt.Sprintf("c-%d", i), At: now.Add(-time.Duration(200+i) * time.Minute)}, now)
	}
	if len(h.Reboots) < 150 {
		t.Errorf("history has %d entries", len(h.Reboots))
	}
}

// Stopped while a post-reboot hook ran (the hook fails with it): the cycle
// says interrupted, and no complete --keep child is started already
// cancelled (it could only fail, logging a false warning).
func TestPostRebootInterrupted(t *testing.T) {
	w := newWorld(t)
	cfg := testConfig(w)
	cfg.PostRebootHooks = []config.Hook{{Name: "uncordon", Cmd: []string{"/bin/true"}}}
	writeMarker(t, w, "boot-1", testNow.Add(-5*time.Minute))
	w.detect.required = false
	w.hooks.err = errors.New("hook uncordon was interrupted")
	d := newDriver(t, w, cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := d.RunOnce(ctx, Mode{})
	if out.Reason != protocol.ReasonInterrupted || out.Step != 0 || !strings.Contains(out.Detail, "stopped during the post-reboot checks") {
		t.Fatalf("out %s step %d: %s", out.Reason, out.Step, out.Detail)
	}
	if steps := w.child.steps(); slices.Contains(steps, protocol.StepComplete) {
		t.Errorf("child steps %v: no complete --keep after the stop", steps)
	}
}

// A daemon restarted in the middle of the post-reboot checks (a new Driver on
// the same state_dir) does not run the post-reboot hooks or the settle wait
// again for the same boot; another boot, or a lost progress file, does.
func TestPostRebootProgressSurvivesRestart(t *testing.T) {
	tests := []struct {
		name        string
		between     func(t *testing.T, w *world) // after the first daemon, before the second
		wantHooks   int
		wantSleeps  int
		fileRemoved bool
	}{
		{name: "restart in the same boot", wantHooks: 1, wantSleeps: 1, fileRemoved: true},
		{name: "rebooted again before the checks passed", between: func(t *testing.T, w *world) {
			w.bootID = "boot-3"
		}, wantHooks: 2, wantSleeps: 2, fileRemoved: true},
		{name: "progress file corrupt: the steps run again", between: func(t *testing.T, w *world) {
			if err := os.WriteFile(filepath.Join(w.stateDir, PostProgressFile), []byte("{"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, wantHooks: 2, wantSleeps: 2, fileRemoved: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			cfg := testConfig(w)
			cfg.SettleSec = 30
			cfg.PostRebootHooks = []config.Hook{{Name: "uncordon", Cmd: []string{"/bin/true"}}}
			writeMarker(t, w, "boot-1", testNow.Add(-5*time.Minute))
			w.detect.required = false
			// The first daemon runs the hooks and settles, then cannot free
			// the slot (etcd down) and is restarted.
			w.child.answers[protocol.StepComplete] = answer{code: exitcode.EtcdUnavailable, json: `{"exit_code":7,"error":"etcd down"}`}
			first := newDriver(t, w, cfg, nil)
			if out := first.RunOnce(context.Background(), Mode{}); out.Reason != protocol.ReasonEtcd {
				t.Fatalf("first daemon: %s %s", out.Reason, out.Detail)
			}
			if w.hooks.calls != 1 || len(w.slept) != 1 {
				t.Fatalf("first daemon: hooks %d, sleeps %d", w.hooks.calls, len(w.slept))
			}
			if _, err := os.Stat(filepath.Join(w.stateDir, PostProgressFile)); err != nil {
				t.Fatalf("no progress file: %v", err)
			}
			if tt.between != nil {
				tt.between(t, w)
			}
			w.child.answers[protocol.StepComplete] = answer{json: `{"exit_code":0,"freed":true}`}
			second := newDriver(t, w, cfg, nil)
			out := second.RunOnce(context.Background(), Mode{})
			if out.Step == 0 {
				t.Fatalf("second daemon stopped at step 0: %s %s", out.Reason, out.Detail)
			}
			if w.hooks.calls != tt.wantHooks || len(w.slept) != tt.wantSleeps {
				t.Errorf("hooks ran %d times, settle waited %d times; want %d and %d", w.hooks.calls, len(w.slept), tt.wantHooks, tt.wantSleeps)
			}
			if _, err := os.Stat(filepath.Join(w.stateDir, PostProgressFile)); !errors.Is(err, os.ErrNotExist) == tt.fileRemoved {
				t.Errorf("progress file after completion: %v", err)
			}
		})
	}
}
