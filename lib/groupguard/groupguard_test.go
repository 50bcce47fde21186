package groupguard

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// The test binary is also the guardian: Start runs it with this argument.
const serveArg = "groupguard-test-serve"

func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == serveArg {
		if err := Serve(os.Stdin, os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func startGuard(t *testing.T) *Guard {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Start(exe, []string{exe, serveArg}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestStopKillsWhatTheCommandLeft(t *testing.T) {
	g := startGuard(t)
	cmd := exec.Command("sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: g.Pgid()}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	left, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	if pgid, _ := syscall.Getpgid(left); pgid != g.Pgid() {
		t.Fatalf("the background child is in group %d, want the guardian's %d", pgid, g.Pgid())
	}
	g.Stop()
	// sleep is re-parented to init, which may reap it a moment later.
	testsupport.WaitGone(t, left, 5*time.Second, "the process left in the group, after Stop")
	if testsupport.Running(g.Pgid()) {
		t.Fatalf("the guardian %d still runs after Stop", g.Pgid())
	}
}

func TestGuardianIgnoresTheSignalsForItsGroup(t *testing.T) {
	g := startGuard(t)
	defer g.Stop()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		if err := syscall.Kill(-g.Pgid(), sig); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if !testsupport.Running(g.Pgid()) {
		t.Fatal("the guardian died of a signal sent to its group")
	}
}

func TestServeRefusesWithoutItsOwnGroup(t *testing.T) {
	// The test process does not lead its group under go test.
	if syscall.Getpgrp() == syscall.Getpid() {
		t.Skip("the test process leads its own process group")
	}
	if err := Serve(strings.NewReader(""), new(strings.Builder), new(strings.Builder)); err == nil || !strings.Contains(err.Error(), "lead its own process group") {
		t.Fatalf("Serve = %v, want the refusal", err)
	}
}
