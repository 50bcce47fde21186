package driver

import (
	"os/exec"
	"syscall"
	"testing"
)

// The daemon waits for its children on a pidfd in the network poller, not in
// wait4 (docs/performance.md, "Wakeups"): waitExit must take that path here
// (pidfd_open is Linux 5.3+), return only once the child has exited, and
// leave it for Wait to reap. For a pid it cannot open it returns at once.
func TestWaitExitUsesPidfd(t *testing.T) {
	cmd := exec.Command("sleep", "0.2")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitExit(cmd.Process.Pid) {
		t.Fatal("waitExit did not wait on a pidfd; the daemon would fall back to wait4")
	}
	var ws syscall.WaitStatus
	pid, err := syscall.Wait4(cmd.Process.Pid, &ws, syscall.WNOHANG, nil)
	if err != nil || pid != cmd.Process.Pid || !ws.Exited() || ws.ExitStatus() != 0 {
		t.Errorf("after waitExit the child was not exited and unreaped: wait4 = %d, %v, status %v", pid, err, ws)
	}
	if waitExit(-1) {
		t.Error("waitExit(-1) claims to have waited")
	}
}
