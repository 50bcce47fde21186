package driver

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/detect"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/window"
)

type fakeDetect struct {
	mu       sync.Mutex
	required bool
	err      error
	calls    int
}

func (f *fakeDetect) set(required bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.required = required
}

func (f *fakeDetect) Detect(ctx context.Context, cfg config.Config) detect.Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return detect.Report{Err: f.err}
	}
	r := detect.Report{RebootRequired: f.required}
	if f.required {
		r.Detectors = []detect.Result{{Name: "file:/run/reboot-required", Required: true}}
	}
	return r
}

type fakeWindows struct {
	mu   sync.Mutex
	open bool
	err  error
}

func (f *fakeWindows) setOpen(open bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open = open
}

func (f *fakeWindows) At(cfg config.Config, now time.Time) (window.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open {
		return window.Decision{Open: true, Reason: "inside allow window"}, f.err
	}
	return window.Decision{Open: false, Reason: `inside deny window "* 00:00-24:00"`}, f.err
}

type fakeGate struct {
	unhealthy map[string]bool
	phases    []string
	sums      []policy.Summary
}

func (f *fakeGate) Check(ctx context.Context, cfg config.Config, phase string, sum policy.Summary) gate.Result {
	f.phases = append(f.phases, phase)
	f.sums = append(f.sums, sum)
	if f.unhealthy[phase] {
		return gate.Result{Phase: phase, Reason: "health script exited 1: quorum lost"}
	}
	return gate.Result{Phase: phase, Healthy: true, Reason: "health script exited 0"}
}

type fakeHooks struct {
	err   error
	calls int
}

func (f *fakeHooks) Run(ctx context.Context, cfg config.Config, hooks []config.Hook) error {
	f.calls++
	return f.err
}

// answer is a canned child reply; block makes the child wait for its
// context (the lock wait) and then answer "interrupted".
type answer struct {
	code  exitcode.Code
	json  string
	err   error
	block bool
	// blockJSON replaces the interrupted reply of a blocking answer.
	blockJSON string
}

type fakeChild struct {
	mu      sync.Mutex
	answers map[string]answer
	calls   []string
	args    []any
	cfgs    []config.Config
	started chan struct{}
	// startOnce closes started at the first blocking call only.
	startOnce sync.Once
}

func (f *fakeChild) Run(ctx context.Context, step string, args any, cfg config.Config, out any) (exitcode.Code, error) {
	f.mu.Lock()
	f.calls = append(f.calls, step)
	f.args = append(f.args, args)
	f.cfgs = append(f.cfgs, cfg)
	a, ok := f.answers[step]
	started := f.started
	f.mu.Unlock()
	if !ok {
		a = answer{code: exitcode.OK, json: `{"tool":"crd-lock","exit_code":0}`}
	}
	if a.block {
		if started != nil {
			f.startOnce.Do(func() { close(started) }) // a second cycle blocks too
		}
		<-ctx.Done()
		reply := `{"tool":"crd-lock","exit_code":130,"exit_name":"interrupted","outcome":"blocked","reason":"interrupted"}`
		if a.blockJSON != "" {
			reply = a.blockJSON
		}
		_ = json.Unmarshal([]byte(reply), out)
		return exitcode.Interrupted, nil
	}
	if a.err != nil {
		return a.code, a.err
	}
	if err := json.Unmarshal([]byte(a.json), out); err != nil {
		return a.code, err
	}
	return a.code, nil
}

func (f *fakeChild) steps() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

type world struct {
	now      time.Time
	kill     bool
	killMu   sync.Mutex
	bootID   string
	busy     error
	detect   *fakeDetect
	windows  *fakeWindows
	gate     *fakeGate
	hooks    *fakeHooks
	child    *fakeChild
	slept    []time.Duration
	stateDir string
	runDir   string
}

func (w *world) setKill(v bool) {
	w.killMu.Lock()
	defer w.killMu.Unlock()
	w.kill = v
}

func (w *world) deps() Deps {
	return Deps{
		Now: func() time.Time { return w.now },
		KillSwitch: func(string) (bool, string, error) {
			w.killMu.Lock()
			defer w.killMu.Unlock()
			return w.kill, "freeze", nil
		},
		BootID:      func() (string, error) { return w.bootID, nil },
		Detect:      w.detect,
		PackageBusy: func() error { return w.busy },
		Windows:     w.windows,
		Gate:        w.gate,
		Hooks:       w.hooks,
		Child:       w.child,
		Sleep: func(ctx context.Context, d time.Duration) error {
			w.slept = append(w.slept, d)
			return nil
		},
	}
}

// publishArgs is the arguments of the child's call i, a publication.
func publishArgs(t *testing.T, f *fakeChild, i int) protocol.PublishArgs {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.args[i].(protocol.PublishArgs)
	if !ok {
		t.Fatalf("child call %d (%s) has arguments %#v, not a publication's", i, f.calls[i], f.args[i])
	}
	return a
}

// wireArgs is args as the request carries them: JSON, "" for none.
func wireArgs(t *testing.T, args any) string {
	t.Helper()
	if args == nil {
		return ""
	}
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
