package gate

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

func testContext() Context {
	return Context{
		Node:                     "node-a",
		ClusterSize:              5,
		FallbackSet:              []string{"node-d", "node-e"},
		EtcdEndpoints:            []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379"},
		Phase:                    PhasePreLock,
		LockKey:                  "/cluster/clusterrebootd/lock",
		MinHealthyFraction:       0.75,
		MinHealthyAbsolute:       3,
		ForbidIfOnlyFallbackLeft: true,
	}
}

func TestEnviron(t *testing.T) {
	tests := []struct {
		name string
		ctx  Context
		want []string
	}{
		{"full context", testContext(), []string{
			"PATH=" + Path, "LC_ALL=C", "NODE_NAME=node-a", "CLUSTER_SIZE=5",
			"FALLBACK_SET=node-d,node-e", "ETCD_ENDPOINTS=https://10.0.0.1:2379,https://10.0.0.2:2379",
			"PHASE=pre-lock", "LOCK_KEY=/cluster/clusterrebootd/lock", "MIN_HEALTHY_FRACTION=0.75",
			"MIN_HEALTHY_ABSOLUTE=3", "FORBID_IF_ONLY_FALLBACK_LEFT=true", "DRY_RUN=false",
		}},
		{"unknown values stay present and empty", Context{Phase: PhaseUnderLock, DryRun: true}, []string{
			"PATH=" + Path, "LC_ALL=C", "NODE_NAME=", "CLUSTER_SIZE=",
			"FALLBACK_SET=", "ETCD_ENDPOINTS=",
			"PHASE=under-lock", "LOCK_KEY=", "MIN_HEALTHY_FRACTION=0",
			"MIN_HEALTHY_ABSOLUTE=0", "FORBID_IF_ONLY_FALLBACK_LEFT=false", "DRY_RUN=true",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.ctx.Environ(); !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestRun(t *testing.T) {
	long := strings.Repeat("x", 300)
	tests := []struct {
		name     string
		body     string // script body; "" with noScript means health_script unset
		noScript bool
		perm     os.FileMode
		timeout  time.Duration
		phase    string
		code     exitcode.Code
		check    func(t *testing.T, r Result)
	}{
		{name: "exit 0 is healthy", body: "echo all good; echo note >&2", code: exitcode.OK,
			check: func(t *testing.T, r Result) {
				if r.ExitStatus != 0 || r.Stdout != "all good\n" || r.Stderr != "note\n" || r.TimedOut {
					t.Errorf("%+v", r)
				}
				if !strings.HasSuffix(r.Reason, "exited 0") {
					t.Errorf("reason %q", r.Reason)
				}
			}},
		{name: "exit 1 quotes the last stderr line", body: "echo first >&2; echo 'quorum lost: 2/5' >&2; echo; exit 1", code: exitcode.HealthBlocked,
			check: func(t *testing.T, r Result) {
				if r.Healthy || r.ExitStatus != 1 || !strings.HasSuffix(r.Reason, "exited 1: quorum lost: 2/5") {
					t.Errorf("%+v", r)
				}
			}},
		{name: "stdout quoted when stderr is empty", body: "echo 'only fallback left'; exit 4", code: exitcode.HealthBlocked,
			check: func(t *testing.T, r Result) {
				if r.ExitStatus != 4 || !strings.HasSuffix(r.Reason, "exited 4: only fallback left") {
					t.Errorf("%+v", r)
				}
			}},
		{name: "silent failure", body: "exit 2", code: exitcode.HealthBlocked,
			check: func(t *testing.T, r Result) {
				if !strings.HasSuffix(r.Reason, "exited 2") {
					t.Errorf("%+v", r)
				}
			}},
		{name: "long last line is shortened", body: "echo " + long + " >&2; exit 1", code: exitcode.HealthBlocked,
			check: func(t *testing.T, r Result) {
				if !strings.HasSuffix(r.Reason, strings.Repeat("x", 200)+"...") || strings.Contains(r.Reason, strings.Repeat("x", 201)) {
					t.Errorf("reason %q", r.Reason)
				}
			}},
		{name: "timeout", body: "echo started; sleep 30", timeout: 300 * time.Millisecond, code: exitcode.HealthBlocked,
			check: func(t *testing.T, r Result) {
				if !r.TimedOut || r.ExitStatus != -1 || !strings.Contains(r.Reason, "timed out after 300ms: started") {
					t.Errorf("%+v", r)
				}
			}},
		{name: "killed by a signal", body: "kill -KILL $$", code: exitcode.HealthBlocked,
			check: func(t *testing.T, r Result) {
				if r.Signal != "SIGKILL" || r.ExitStatus != -1 || !strings.Contains(r.Reason, "killed by signal SIGKILL") {
					t.Errorf("%+v", r)
				}
			}},
		{name: "output truncated at 64 KiB", body: "head -c 70000 /dev/zero | tr '\\0' o; head -c 10 /dev/zero >&2", code: exitcode.OK,
			check: func(t *testing.T, r Result) {
				if len(r.Stdout) > MaxOutput+40 || !r.StdoutTruncated || r.StderrTruncated || len(r.Stderr) != 10 ||
					!strings.Contains(r.Stdout, "bytes dropped") {
					t.Errorf("stdout %d truncated %v, stderr %d truncated %v", len(r.Stdout), r.StdoutTruncated, len(r.Stderr), r.StderrTruncated)
				}
			}},
		// The reason is the script's last line, not the head of a long output.
		{name: "the reason is the last line of a long output", body: "head -c 200000 /dev/zero | tr '\\0' o >&2; echo >&2; echo 'replica lag 40s on db-2' >&2; exit 1", code: exitcode.HealthBlocked,
			check: func(t *testing.T, r Result) {
				if !strings.Contains(r.Reason, "replica lag 40s on db-2") {
					t.Errorf("reason %q, want the script's last line", r.Reason)
				}
			}},
		{name: "runs in the root directory", body: "pwd", code: exitcode.OK,
			check: func(t *testing.T, r Result) {
				if r.Stdout != "/\n" {
					t.Errorf("cwd %q", r.Stdout)
				}
			}},
		{name: "bad interpreter cannot start", body: "", perm: 0o755, code: exitcode.HealthBlocked,
			check: func(t *testing.T, r Result) {
				if !strings.Contains(r.Reason, "could not be started: no such file or directory: its interpreter /nonexistent/interpreter (the #! line) does not exist") {
					t.Errorf("the reason must name the missing interpreter: %+v", r)
				}
			}},
		{name: "no script configured blocks", noScript: true, code: exitcode.HealthBlocked,
			check: func(t *testing.T, r Result) {
				if r.Reason != NoScriptReason {
					t.Errorf("reason %q", r.Reason)
				}
			}},
		{name: "world-writable script is a config error and does not run", body: "exit 0", perm: 0o777, code: exitcode.Config,
			check: func(t *testing.T, r Result) {
				if r.DurationMS != 0 || !strings.Contains(r.Reason, "world-writable") {
					t.Errorf("%+v", r)
				}
			}},
		{name: "unknown phase", body: "exit 0", phase: "later", code: exitcode.Config,
			check: func(t *testing.T, r Result) {
				if !strings.Contains(r.Reason, `phase "later"`) {
					t.Errorf("%+v", r)
				}
			}},
		{name: "zero timeout", body: "exit 0", timeout: -1, code: exitcode.Config,
			check: func(t *testing.T, r Result) {
				if !strings.Contains(r.Reason, "must be positive") {
					t.Errorf("%+v", r)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			script := ""
			if !tt.noScript {
				perm := tt.perm
				if perm == 0 {
					perm = 0o755
				}
				script = writeScript(t, dir, "check", tt.body, perm)
				if tt.name == "bad interpreter cannot start" {
					if err := os.WriteFile(script, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
						t.Fatal(err)
					}
				}
			}
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			if timeout < 0 {
				timeout = 0
			}
			c := testContext()
			if tt.phase != "" {
				c.Phase = tt.phase
			}
			r := Run(context.Background(), proc.Exec{}, script, timeout, c)
			if got := exitcode.CodeOf(r.Err()); got != tt.code {
				t.Fatalf("code %v, want %v (%+v)", got, tt.code, r)
			}
			if r.Healthy != (tt.code == exitcode.OK) {
				t.Errorf("healthy %v with code %v", r.Healthy, tt.code)
			}
			if r.Script != script || r.Phase != c.Phase {
				t.Errorf("script %q phase %q", r.Script, r.Phase)
			}
			if r.Err() != nil && !strings.Contains(r.Err().Error(), r.Reason) {
				t.Errorf("error %q does not carry reason %q", r.Err(), r.Reason)
			}
			tt.check(t, r)
		})
	}
}

// The script sees exactly the documented variables: nothing of the caller's
// environment (where a password might live) leaks through.
func TestRunEnvironment(t *testing.T) {
	t.Setenv("ETCDCTL_PASSWORD", "hunter2")
	t.Setenv("CRD_ETCD_PASSWORD_FILE", "/etc/secret")
	dir := t.TempDir()
	out := filepath.Join(dir, "env.txt")
	script := writeScript(t, dir, "check", "env > "+out, 0o755)
	r := Run(context.Background(), proc.Exec{}, script, 10*time.Second, testContext())
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, _, _ := strings.Cut(l, "=")
		if name == "PWD" || name == "SHLVL" || name == "_" || name == "OLDPWD" {
			continue // set by the shell itself
		}
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"CLUSTER_SIZE", "DRY_RUN", "ETCD_ENDPOINTS", "FALLBACK_SET",
		"FORBID_IF_ONLY_FALLBACK_LEFT", "HEALTH_TIMEOUT_SEC", "LC_ALL", "LOCK_KEY", "MIN_HEALTHY_ABSOLUTE",
		"MIN_HEALTHY_FRACTION", "NODE_NAME", "PATH", "PHASE"}
	if !slices.Equal(names, want) {
		t.Errorf("script saw %q\nwant      %q", names, want)
	}
	if strings.Contains(string(b), "hunter2") || strings.Contains(string(b), "/etc/secret") {
		t.Errorf("secret leaked into the script's environment:\n%s", b)
	}
	if !strings.Contains(string(b), "HEALTH_TIMEOUT_SEC=10\n") {
		t.Errorf("timeout not passed:\n%s", b)
	}
}

// A timeout ends the whole process group: a background child of the script
// must not survive it.
func TestRunTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "bg.pid")
	script := writeScript(t, dir, "check", "sleep 300 & echo $! > "+pidfile+"; wait", 0o755)
	r := Run(context.Background(), proc.Exec{}, script, 300*time.Millisecond, testContext())
	if !r.TimedOut || exitcode.CodeOf(r.Err()) != exitcode.HealthBlocked {
		t.Fatalf("want timed out and blocked, got %+v", r)
	}
	pid := testsupport.ReadPID(t, pidfile)
	// SIGKILL has been sent to the group; allow a loose bound for the
	// kernel to finish it (a zombie awaiting its reaper counts as gone).
	testsupport.WaitGone(t, pid, 5*time.Second, "the background child, after the timeout")
}

func TestRunCanceled(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "check", "sleep 30", 0o755)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	r := Run(ctx, proc.Exec{}, script, 30*time.Second, testContext())
	if got := exitcode.CodeOf(r.Err()); got != exitcode.Interrupted || r.Healthy {
		t.Fatalf("code %v, want interrupted: %+v", got, r)
	}
}

// fakeRunner returns a canned result, to reach branches a real process
// cannot be forced into.
type fakeRunner struct{ res proc.Result }

func (f fakeRunner) Run(context.Context, proc.Spec) proc.Result { return f.res }

func TestResultErr(t *testing.T) {
	tests := []struct {
		name string
		r    Result
		code exitcode.Code
		msg  string
	}{
		{"healthy", Result{Healthy: true}, exitcode.OK, ""},
		{"hand-made blocked result", Result{Reason: "quorum lost"}, exitcode.HealthBlocked, "gate: quorum lost"},
		{"blocked without reason", Result{}, exitcode.HealthBlocked, "gate: health check did not pass"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Err()
			if exitcode.CodeOf(err) != tt.code {
				t.Fatalf("code %v, want %v", exitcode.CodeOf(err), tt.code)
			}
			if err != nil && err.Error() != tt.msg {
				t.Errorf("message %q, want %q", err, tt.msg)
			}
		})
	}
}

// The signal's name comes from lib/proc (Result.Signal) as it is.
func TestSignalNamed(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "check", "exit 0", 0o755)
	r := Run(context.Background(), fakeRunner{proc.Result{ExitCode: -1, Signal: "SIGTERM"}}, script, time.Second, testContext())
	if r.Signal != "SIGTERM" || !strings.Contains(r.Reason, "killed by signal SIGTERM") {
		t.Errorf("%+v", r)
	}
}

func TestFromConfig(t *testing.T) {
	cfg := config.Default()
	cfg.NodeName = "node-a"
	cfg.ClusterPolicies = config.Policies{MinHealthyFraction: 0.5, MinHealthyAbsolute: 2, ForbidIfOnlyFallbackLeft: true, FallbackNodes: []string{"f"}}
	cfg.DryRun = true
	cfg.Group = "rack1"
	c := FromConfig(cfg, PhaseUnderLock)
	// LOCK_KEY is the group's lock key, as the pre-reboot hooks get it.
	want := Context{Node: "node-a", FallbackSet: []string{"f"}, EtcdEndpoints: cfg.EtcdEndpoints, Phase: PhaseUnderLock,
		LockKey: cfg.LockKey + "/rack1", MinHealthyFraction: 0.5, MinHealthyAbsolute: 2, ForbidIfOnlyFallbackLeft: true, DryRun: true}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	if Timeout(cfg) != 30*time.Second {
		t.Errorf("timeout %s", Timeout(cfg))
	}
}
