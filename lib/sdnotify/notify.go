// Package sdnotify speaks systemd's sd_notify protocol directly: one datagram
// of newline-separated KEY=VALUE lines to the unix socket named by
// $NOTIFY_SOCKET (a path, or an abstract socket when it starts with '@').
//
// It is best effort and silent outside systemd: with no socket configured
// every call is a no-op. The caller reads the environment (NOTIFY_SOCKET,
// WATCHDOG_USEC, WATCHDOG_PID) and passes the values in.
package sdnotify

import (
	"fmt"
	"golang.org/x/sys/unix"
	"strconv"
	"strings"
	"time"
)

// Socket sends state changes to systemd.
type Socket struct {
	socket string
}

// New returns a notifier for the socket named by NOTIFY_SOCKET's value;
// "" gives a notifier that does nothing.
func New(socket string) *Socket { return &Socket{socket: socket} }

// Enabled reports whether a socket is configured.
func (n *Socket) Enabled() bool { return n != nil && n.socket != "" }

// Send writes one datagram with the given state lines ("READY=1", ...).
func (n *Socket) Send(states ...string) error {
	if !n.Enabled() || len(states) == 0 {
		return nil
	}
	// A raw socket rather than package net: net links the DNS resolver and
	// costs the idle daemon memory for nothing (docs/performance.md).
	name := n.socket
	if strings.HasPrefix(name, "@") {
		name = "\x00" + name[1:]
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("notify: socket: %w", err)
	}
	defer func() { _ = unix.Close(fd) }()
	msg := []byte(strings.Join(states, "\n") + "\n")
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrUnix{Name: name}); err != nil {
		return fmt.Errorf("notify: send to %s: %w", n.socket, err)
	}
	return nil
}

// Ready tells systemd start-up is complete, with a status line.
func (n *Socket) Ready(status string) error {
	return n.Send("READY=1", "STATUS="+oneLine(status))
}

// Status sets the free-form status systemctl status shows.
func (n *Socket) Status(status string) error { return n.Send("STATUS=" + oneLine(status)) }

// Watchdog pings the service watchdog.
func (n *Socket) Watchdog() error { return n.Send("WATCHDOG=1") }

// Stopping tells systemd the service is shutting down.
func (n *Socket) Stopping(status string) error {
	return n.Send("STOPPING=1", "STATUS="+oneLine(status))
}

// WatchdogInterval is how often to ping given WATCHDOG_USEC and
// WATCHDOG_PID: half the watchdog timeout, or 0 when no watchdog is
// configured for this process (pid). Malformed values mean no watchdog.
func WatchdogInterval(usec, watchdogPID string, pid int) time.Duration {
	if usec == "" {
		return 0
	}
	if watchdogPID != "" {
		p, err := strconv.Atoi(watchdogPID)
		if err != nil || p != pid {
			return 0
		}
	}
	u, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || u == 0 {
		return 0
	}
	return time.Duration(u) * time.Microsecond / 2
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
