package etcdtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A process that started a binary server and ends without stopping it (a
// signal, a test binary's timeout: its deferred stops never run) takes the
// server with it. A stopped crdbench used to leave its etcd running.
func TestABinaryServerEndsWithItsStarter(t *testing.T) {
	bin := os.Getenv("CRD_TEST_ETCD")
	if dir := os.Getenv("ETCDTEST_STARTER_DIR"); dir != "" {
		// The starter: start the server, say its PID, wait to be killed.
		s, err := Start(Options{Binary: bin, Dir: dir})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("pid", s.PID)
		time.Sleep(time.Minute)
		s.Stop()
		os.Exit(1)
	}
	if bin == "" {
		t.Skip("CRD_TEST_ETCD names no etcd binary (make test-lock-integration sets it)")
	}
	starter := exec.Command(os.Args[0], "-test.run=^TestABinaryServerEndsWithItsStarter$")
	starter.Env = append(os.Environ(), "ETCDTEST_STARTER_DIR="+t.TempDir())
	out, err := starter.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := starter.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	if err != nil || pid <= 0 {
		_ = starter.Process.Kill()
		_ = starter.Wait()
		t.Fatalf("the starter said %q, want its server's pid", line)
	}
	_ = starter.Process.Kill() // SIGKILL: nothing of the starter runs after it
	_ = starter.Wait()
	for deadline := time.Now().Add(10 * time.Second); alive(pid); {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("etcd (pid %d) outlived the process that started it by 10 s", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive: pid names a process that is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
