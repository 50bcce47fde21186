package sdnotify

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	addr := name
	if strings.HasPrefix(name, "@") {
		addr = "\x00" + name[1:]
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func read(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotify(t *testing.T) {
	for _, kind := range []string{"path", "abstract"} {
		t.Run(kind, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "notify.sock")
			if kind == "abstract" {
				name = "@crd-test-" + filepath.Base(t.TempDir())
			}
			conn := listen(t, name)
			n := New(name)
			if !n.Enabled() {
				t.Fatal("not enabled")
			}
			steps := []struct {
				send func() error
				want string
			}{
				{func() error { return n.Ready("idle\nsince boot") }, "READY=1\nSTATUS=idle since boot\n"},
				{func() error { return n.Status("blocked (window)") }, "STATUS=blocked (window)\n"},
				{n.Watchdog, "WATCHDOG=1\n"},
				{func() error { return n.Stopping("bye") }, "STOPPING=1\nSTATUS=bye\n"},
			}
			for _, s := range steps {
				if err := s.send(); err != nil {
					t.Fatal(err)
				}
				if got := read(t, conn); got != s.want {
					t.Errorf("got %q, want %q", got, s.want)
				}
			}
		})
	}
}

func TestNotifyOutsideSystemd(t *testing.T) {
	n := New("")
	if n.Enabled() || n.Ready("x") != nil || n.Watchdog() != nil || n.Send() != nil {
		t.Fatal("a notifier without a socket must do nothing")
	}
	var nilN *Socket
	if nilN.Enabled() || nilN.Status("x") != nil {
		t.Fatal("nil notifier")
	}
}

func TestNotifySocketGone(t *testing.T) {
	n := New(filepath.Join(t.TempDir(), "missing.sock"))
	if err := n.Watchdog(); err == nil || !strings.Contains(err.Error(), "missing.sock") {
		t.Fatalf("err %v", err)
	}
}

func TestWatchdogInterval(t *testing.T) {
	pid := os.Getpid()
	tests := []struct {
		usec, pid string
		want      time.Duration
	}{
		{"", "", 0},
		{"60000000", "", 30 * time.Second},
		{"60000000", "1", 0},
		{"60000000", "x", 0},
		{"2000000", itoa(pid), time.Second},
		{"abc", "", 0},
		{"0", "", 0},
	}
	for _, tt := range tests {
		if got := WatchdogInterval(tt.usec, tt.pid, pid); got != tt.want {
			t.Errorf("WatchdogInterval(%q, %q) = %v, want %v", tt.usec, tt.pid, got, tt.want)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
