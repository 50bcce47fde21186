// Package testscripts runs every tool as a real command through testscript:
// each testscripts/*.txtar file is a script of shell-like commands with
// assertions on exit codes, stdout (JSON) and stderr.
package testscripts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/clusterrebootd/clusterrebootd/cmd/tool/clusterrebootd"
	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crddetect"
	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crdgate"
	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crdlock"
	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crdreboot"
	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crdwindow"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
)

// tools are registered as cmd/<tool>/main.go runs them: cli.Exec with the
// process's arguments and streams under a context that SIGINT and SIGTERM
// cancel.
var tools = map[string]cli.RunFunc{
	"crd-detect":     crddetect.Run,
	"crd-window":     crdwindow.Run,
	"crd-gate":       crdgate.Run,
	"crd-reboot":     crdreboot.Run,
	"crd-lock":       crdlock.Run,
	"clusterrebootd": clusterrebootd.Run,
}

func TestMain(m *testing.M) {
	cmds := map[string]func(){}
	for name, run := range tools {
		cmds[name] = func() {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := cli.Exec(ctx, name, run, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
			stop()
			os.Exit(code)
		}
	}
	testscript.Main(m, cmds)
}

func TestScripts(t *testing.T) {
	hostDirsUntouched(t)
	testscript.Run(t, Params("."))
}

// hostDirsUntouched fails t when a script, run with a default run_dir or
// state_dir, created the host's: those are one for every script running
// at once (a publish lease or rules cache one script remembers there is
// another etcd's to the next), and not a test's to write. A host where
// they exist already (an installed daemon) is not checked.
func hostDirsUntouched(t *testing.T) {
	d := config.Default()
	for _, dir := range []string{d.RunDir, d.StateDir} {
		if _, err := os.Stat(dir); err == nil {
			continue
		}
		t.Cleanup(func() { // after the parallel scripts
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("a script wrote %s, the default run_dir or state_dir: give its configuration one in $WORK (etcd-start's crd.yaml has run_dir $WORK/run)", dir)
			}
		})
	}
}

// Params is the shared setup: the custom commands and environment.
func Params(dir string) testscript.Params {
	return testscript.Params{
		Dir: dir,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode":      cmdExitcode,
			"etcd-start":    CmdEtcdStart,
			"etcd-requests": CmdEtcdRequests,
			"waitfile":      CmdWaitFile,
			"free-port":     cmdFreePort,
			"wait-listen":   cmdWaitListen,
			"webhook-start": CmdWebhookStart,
			// monitoring_*.txtar: a real Alertmanager (monitoring_test.go).
			"alertmanager-start": CmdAlertmanagerStart,
			// monitoring_alertgate, monitoring_postreboot: Prometheus too (prometheus_test.go).
			"monitoring": CmdMonitoring,
		},
		Setup: func(env *testscript.Env) error {
			// No test may see the host's configuration: the default config is an
			// empty file in the script's work dir (so built-in defaults apply,
			// and $WORK/config.d/*.yaml are its drop-ins).
			def := env.WorkDir + "/default-config.yaml"
			env.Setenv("CRD_CONFIG", def)
			// $REPO: the source tree, for scripts that run what it ships
			// (packaging/etcd-rbac.sh).
			repo, err := filepath.Abs("..")
			if err != nil {
				return err
			}
			env.Setenv("REPO", repo)
			return os.WriteFile(def, nil, 0o644)
		},
		// [root]: the script runs as root (it chowns files to other users).
		// [monitoring]: Prometheus and Alertmanager are installed (prometheus_test.go).
		// [etcd-binary]: an etcd server binary for etcd-start -binary (etcd_test.go).
		// [etcdctl], [etcd-3.4]: see etcdCondition (etcd_test.go).
		Condition: func(cond string) (bool, error) {
			if cond == "etcd-binary" {
				return etcdBinary() != "", nil
			}
			if ok, handled := monitoringCondition(cond); handled {
				return ok, nil
			}
			if ok, handled := etcdCondition(cond); handled {
				return ok, nil
			}
			if cond == "monitoring" {
				return MonitoringAvailable()
			}
			if cond == "root" {
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		RequireExplicitExec: true,
	}
}

// cmdExitcode runs "exitcode N CMD ARGS..." and fails unless CMD exits with
// status N. Its stdout and stderr are kept for the next stdout/stderr checks.
func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("usage: exitcode N command [args...] (no negation)")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %q is not a number", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			ts.Fatalf("exitcode: running %s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}
