// Package groupguard keeps a command's process group from outliving the
// process that runs it, however that process dies (SIGKILL, the OOM killer).
//
// A parent-death signal alone does not do it: it reaches only the direct
// child, and in Go it is tied to the thread that forked, not to the process.
// Instead the parent starts a guardian: a small process that leads a new
// process group and reads a pipe whose write end only the parent holds. The
// command is started into the guardian's group. When the parent dies, the
// kernel closes the write end, the guardian's read returns, and the guardian
// sends SIGKILL to the whole group, itself included.
//
// A process that leaves the group (setsid, setpgid: daemons, `setsid CMD`)
// is out of reach; so is anything started on the command's behalf by another
// process (systemctl start, at, cron). A cgroup reaches those: see
// docs/lock.md.
package groupguard

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// readyLine is what the guardian writes once it ignores the signals sent to
// its group; the parent starts nothing in the group before reading it.
const readyLine = "groupguard ready"

// startTimeout bounds the wait for the guardian's ready line.
const startTimeout = 10 * time.Second

// Guard is a running guardian.
type Guard struct {
	cmd  *exec.Cmd
	life *os.File
	pgid int
}

// Start runs argv (path is its program: the caller's own binary, whose argv
// makes it call Serve) as the guardian, in a new process group that it
// leads, and waits until it is ready. Start commands into that group with
// syscall.SysProcAttr{Setpgid: true, Pgid: g.Pgid()}.
func Start(path string, argv []string, stderr io.Writer) (*Guard, error) {
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("groupguard: %w", err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		lifeR.Close()
		lifeW.Close()
		return nil, fmt.Errorf("groupguard: %w", err)
	}
	defer readyR.Close()
	// Both pipes are close-on-exec: the command started later inherits
	// neither end, so only this process keeps the guardian's pipe open.
	cmd := &exec.Cmd{Path: path, Args: argv, Stdin: lifeR, Stdout: readyW, Stderr: stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	err = cmd.Start()
	lifeR.Close()
	readyW.Close()
	if err != nil {
		lifeW.Close()
		return nil, fmt.Errorf("groupguard: starting %s: %w", path, err)
	}
	g := &Guard{cmd: cmd, life: lifeW, pgid: cmd.Process.Pid}
	_ = readyR.SetReadDeadline(time.Now().Add(startTimeout))
	line, err := bufio.NewReader(readyR).ReadString('\n')
	if err != nil || line != readyLine+"\n" {
		g.Stop()
		return nil, fmt.Errorf("groupguard: %s did not report ready (%q, %v)", path, line, err)
	}
	return g, nil
}

// Pgid is the process group the guardian leads and guards.
func (g *Guard) Pgid() int { return g.pgid }

// Stop sends SIGKILL to the whole group — whatever the command left running
// in it, and the guardian — and reaps the guardian. Call it once the
// command has ended, before giving up what the group must not outlive.
func (g *Guard) Stop() {
	_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
	g.life.Close()
	_ = g.cmd.Wait()
}

// Serve is the guardian's side. life is the read end of the pipe that only
// the parent writes to; ready gets the ready line. It returns only on a
// usage error: otherwise it ends killed by its own SIGKILL to the group.
func Serve(life io.Reader, ready io.Writer, stderr io.Writer) error {
	pgid := syscall.Getpgrp()
	if pgid != syscall.Getpid() {
		return errors.New("groupguard: the guardian must lead its own process group (it is started by crd-lock hold, not by hand)")
	}
	// Signals for COMMAND are sent to the whole group; the guardian stays.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)
	parent := os.Getppid()
	if _, err := fmt.Fprintln(ready, readyLine); err != nil {
		return fmt.Errorf("groupguard: reporting ready: %w", err)
	}
	// Returns at EOF: the parent closed its end (Stop) or is dead.
	_, _ = io.Copy(io.Discard, life)
	// The message must not delay the kill: stderr may be a pipe nobody reads.
	said := make(chan struct{})
	go func() {
		fmt.Fprintf(stderr, "groupguard: parent process %d is gone; killing process group %d (its command and all it started there)\n", parent, pgid)
		close(said)
	}()
	select {
	case <-said:
	case <-time.After(100 * time.Millisecond):
	}
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	// Reached only if the kill failed: it includes this process.
	return fmt.Errorf("groupguard: killing process group %d: %v", pgid, err)
}
