package testsupport

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSyncBufferConcurrent(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := len(b.String()); got != 400 {
		t.Fatalf("len = %d, want 400", got)
	}
}

func TestRunning(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Run("a live process runs", func(t *testing.T) {
		if !Running(pid) {
			t.Fatal("Running = false for a sleeping child")
		}
	})
	cmd.Process.Kill()
	t.Run("a killed, unreaped process (a zombie) is gone", func(t *testing.T) {
		WaitGone(t, pid, 5*time.Second, "the killed sleep")
	})
	cmd.Wait()
	t.Run("a reaped process is gone", func(t *testing.T) {
		if Running(pid) {
			t.Fatal("Running = true after Wait")
		}
	})
	t.Run("this process runs", func(t *testing.T) {
		if !Running(os.Getpid()) {
			t.Fatal("Running(self) = false")
		}
	})
}

func TestEventuallyFailsWithWhat(t *testing.T) {
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(ft, 30*time.Millisecond, "the sky falls", func() bool { return false })
	}()
	<-done
	if !strings.Contains(ft.msg, "the sky falls") {
		t.Fatalf("failure %q does not name the condition", ft.msg)
	}
}

// fakeT records Fatalf and ends the goroutine, as testing.T does.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestReadPID(t *testing.T) {
	p := t.TempDir() + "/pid"
	if err := os.WriteFile(p, []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := ReadPID(t, p); got != 4242 {
		t.Fatalf("ReadPID = %d, want 4242", got)
	}
}
