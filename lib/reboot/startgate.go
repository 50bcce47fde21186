package reboot

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// The start gate: a reboot command run under `crd-lock hold --reboot-slot`
// (crd-reboot) asks the process that holds its reboot slot, right before
// it runs, whether it may start, and the holder answers with the same last
// checks the daemon makes there (the windows, the pause, a halt, the
// node's hold, the slot still alive: lib/slot Reboot.Start). The question
// goes over two pipes crd-lock passes down, named in EnvStartFDs, so
// crd-reboot needs no etcd connection of its own and works unchanged by
// hand, where there is no gate.

// EnvStartFDs names the environment variable of the start gate: "IN,OUT",
// two inherited file descriptors (crd-reboot reads its answer from IN and
// writes its question to OUT).
const EnvStartFDs = "CRD_REBOOT_START_FDS"

// startAnswer is the gate's answer: exit code 0 to go on, else the code and
// the reason the reboot command must not run.
type startAnswer struct {
	ExitCode int    `json:"exit_code"`
	Error    string `json:"error,omitempty"`
}

// AskStart asks the start gate named by fds (EnvStartFDs's value) whether
// the reboot command may run now; "" is no gate (nil). An answer that says
// no is its error with its exit code; a gate that cannot be asked or does
// not answer is exit 9: nothing may run then, since the holder may know a
// reason to stop it.
func AskStart(ctx context.Context, fds string) error {
	if fds == "" {
		return nil
	}
	in, out, err := gateFiles(fds)
	if err != nil {
		return exitcode.Errorf(exitcode.RebootFailed, "reboot: %s=%q: %v; the reboot slot's holder cannot be asked, so nothing is rebooted", EnvStartFDs, fds, err)
	}
	defer in.Close()
	defer out.Close()
	type result struct {
		line string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		if _, err := io.WriteString(out, "start\n"); err != nil {
			got <- result{err: err}
			return
		}
		line, err := bufio.NewReader(in).ReadString('\n')
		got <- result{line, err}
	}()
	var r result
	select {
	case <-ctx.Done():
		return exitcode.Errorf(exitcode.Interrupted, "reboot: interrupted while the reboot slot's holder decided whether the reboot command may start")
	case r = <-got:
	}
	var a startAnswer
	if r.err != nil || json.Unmarshal([]byte(r.line), &a) != nil {
		return exitcode.Errorf(exitcode.RebootFailed, "reboot: the reboot slot's holder did not answer whether the reboot command may start (%v); nothing is rebooted", orEOF(r.err))
	}
	if a.ExitCode != 0 {
		return exitcode.Errorf(exitcode.Code(a.ExitCode), "%s", a.Error)
	}
	return nil
}

func orEOF(err error) error {
	if err == nil {
		return errors.New("unreadable answer")
	}
	return err
}

// gateFiles opens the two descriptors "IN,OUT".
func gateFiles(fds string) (in, out *os.File, err error) {
	a, b, ok := strings.Cut(fds, ",")
	nin, err1 := strconv.Atoi(a)
	nout, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || nin < 3 || nout < 3 {
		return nil, nil, fmt.Errorf("not two file descriptors IN,OUT")
	}
	in, out = os.NewFile(uintptr(nin), "start-gate-in"), os.NewFile(uintptr(nout), "start-gate-out")
	if in == nil || out == nil {
		return nil, nil, fmt.Errorf("descriptors not open")
	}
	return in, out, nil
}

// ServeStart answers the start gate's questions read from r on w with
// start's verdict (nil: go on; an error: its exit code and message), until
// r ends. Every question is answered, so a reboot command that asks twice
// is told twice.
func ServeStart(r io.Reader, w io.Writer, start func() error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "start" {
			continue
		}
		a := startAnswer{}
		if err := start(); err != nil {
			a.ExitCode, a.Error = int(exitcode.CodeOf(err)), err.Error()
		}
		b, _ := json.Marshal(a)
		if _, err := w.Write(append(b, '\n')); err != nil {
			return
		}
	}
}
