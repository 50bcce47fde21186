package clusterrebootd

import (
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// base is what every subcommand shares: the common flags, --crd-lock and
// the hidden --root (file system root for /proc and detector files; tests).
type base struct {
	sub     string
	fs      *flag.FlagSet
	c       cli.Common
	crdLock string
	root    string
	format  report.Format
	// formats are the command's formats besides json and text (report: csv).
	formats []report.Format
	// The flags of one command or another (tree.go).
	reason                  string
	local                   bool
	group                   *string
	force, now              bool
	dryRun, once, noMemTrim bool
}

func newBase(sub string, stdout io.Writer, child bool) *base {
	b := &base{sub: sub, fs: flag.NewFlagSet(Tool+" "+sub, flag.ContinueOnError)}
	b.fs.SetOutput(stdout) // --help and --version
	b.c.Register(b.fs)
	if child {
		b.fs.StringVar(&b.crdLock, "crd-lock", "", "crd-lock `binary` for the cluster steps (default: next to clusterrebootd, else on PATH)")
	}
	return b
}

// parse strips the hidden --root, parses the flags and resolves --format.
func (b *base) parse(args []string, stdout io.Writer) error {
	args, b.root = extractFlag(args, "root")
	if err := cli.Parse(b.fs, args); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			writeError(stdout, err)
		}
		return err
	}
	f, err := b.c.Output(stdout, b.formats...)
	if err != nil {
		writeError(stdout, err)
		return err
	}
	b.format = f
	if b.fs.NArg() > 0 {
		// `validate-config new.yaml` must not check the default file and
		// say "valid"; `pause --reason change freeze` must not drop "freeze".
		err := exitcode.Errorf(exitcode.Config, "%s: unexpected argument %q: a configuration file is given with --config FILE "+
			"and a value with spaces must be quoted (see %s --help)", b.fs.Name(), b.fs.Arg(0), b.fs.Name())
		writeError(stdout, err)
		return err
	}
	return nil
}

// extractFlag removes --name VALUE / --name=VALUE (one or two dashes) from
// args and returns its last value.
func extractFlag(args []string, name string) ([]string, string) {
	var out []string
	value := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		trimmed := strings.TrimLeft(a, "-")
		if len(a)-len(trimmed) == 0 || len(a)-len(trimmed) > 2 {
			out = append(out, a)
			continue
		}
		if trimmed == name && i+1 < len(args) {
			value = args[i+1]
			i++
			continue
		}
		if v, ok := strings.CutPrefix(trimmed, name+"="); ok {
			value = v
			continue
		}
		out = append(out, a)
	}
	return out, value
}

func (b *base) load(override func(*config.Config)) (config.Config, error) {
	return b.c.Load(b.fs, override)
}

// childPath finds crd-lock: --crd-lock, else next to this executable, else
// on PATH.
func (b *base) childPath() (string, error) {
	if b.crdLock != "" {
		if !executable(b.crdLock) {
			return "", exitcode.Errorf(exitcode.Config, "clusterrebootd: --crd-lock %s is not an executable file; give the path of crd-lock", b.crdLock)
		}
		return b.crdLock, nil
	}
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), protocol.ChildTool); executable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(protocol.ChildTool); err == nil {
		return p, nil
	}
	return "", exitcode.Errorf(exitcode.Config, "clusterrebootd: %s not found next to clusterrebootd nor on PATH; install it or pass --crd-lock PATH", protocol.ChildTool)
}

// child is the crd-lock child, logging in this command's --log-format and at
// its --log-level. A one-shot command (status, pause, resume) reports the
// child's outcome itself, error included, so its child logs errors only
// unless --log-level was given: `status` with etcd down prints one line
// naming the endpoint, not that line plus the child's warning saying the
// same.
func (b *base) child(stderr io.Writer, oneShot bool) (driver.Child, error) {
	p, err := b.childPath()
	if err != nil {
		return nil, err
	}
	level := b.c.LogLevel
	if oneShot && !cli.IsSet(b.fs, "log-level") {
		level = "error"
	}
	return driver.ExecChild{Path: p, Stderr: stderr, Root: b.root, LogLevel: level, LogFormat: b.c.LogFormat}, nil
}

// errorResult is the JSON printed when a command fails before it has a
// result of its own.
type errorResult struct {
	report.Header
}

func writeError(stdout io.Writer, err error) {
	_ = report.Finish(stdout, report.JSON, &errorResult{Header: report.Header{Tool: Tool}}, err)
}

// finish names the tool in h, the header of res, and ends the command with
// report.Finish.
func finish(stdout io.Writer, f report.Format, h *report.Header, res report.Settler, err error) error {
	h.Tool = Tool
	return report.Finish(stdout, f, res, err)
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
