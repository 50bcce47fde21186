package crddetect

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
)

// options are crd-detect's own flags.
type options struct {
	detectors     detectorList
	timeoutSec    int
	root          string
	runningKernel string
}

func (o *options) register(fs *flag.FlagSet) {
	fs.Var(detectorFlag{&o.detectors, ""}, "detector", "detector `SPEC` replacing reboot_required_detectors (repeatable): auto, kernel, file:PATH, command:ARGV (ARGV split on spaces) or max_uptime:DAYS")
	fs.Var(detectorFlag{&o.detectors, "file"}, "detector-file", "marker `PATH` whose existence means a reboot is needed; same as --detector file:PATH (repeatable)")
	fs.Var(detectorFlag{&o.detectors, "command"}, "detector-cmd", "`ARGV` (split on spaces, no shell) whose exit 1 means needed and 0 not needed; same as --detector command:ARGV (repeatable)")
	fs.IntVar(&o.timeoutSec, "detector-timeout", 0, "`seconds` each command detector may run (overrides timeout_sec; default 30)")
	fs.StringVar(&o.root, "root", "/", "filesystem root `DIR` that marker files, /etc/os-release, /boot and /lib/modules are read under (commands still run on the host)")
	fs.StringVar(&o.runningKernel, "running-kernel", "", "running kernel `release` for the kernel detector instead of uname -r (for tests and containers)")
}

// apply puts the flags over the loaded configuration.
func (o *options) apply(cfg *config.Config) {
	if len(o.detectors) > 0 {
		cfg.Detectors = append([]detectspec.Detector(nil), o.detectors...)
	}
	if o.timeoutSec != 0 {
		for i := range cfg.Detectors {
			cfg.Detectors[i].TimeoutSec = o.timeoutSec
		}
	}
}

// detectorList collects detectors from --detector, --detector-file and
// --detector-cmd in the order they are given.
type detectorList []detectspec.Detector

// detectorFlag is one of the three flags; kind is "" for --detector
// (TYPE[:ARG]) or the type its value is the argument of.
type detectorFlag struct {
	list *detectorList
	kind string
}

func (f detectorFlag) String() string { return "" }

func (f detectorFlag) Set(v string) error {
	spec := v
	if f.kind != "" {
		spec = f.kind + ":" + v
	}
	d, err := parseDetector(spec)
	if err != nil {
		return err
	}
	*f.list = append(*f.list, d)
	return nil
}

// parseDetector reads TYPE[:ARG]: auto, kernel, file:PATH, command:ARGV,
// max_uptime:DAYS.
func parseDetector(spec string) (detectspec.Detector, error) {
	typ, arg, hasArg := strings.Cut(spec, ":")
	switch typ {
	case "auto", "kernel":
		if hasArg {
			return detectspec.Detector{}, fmt.Errorf("detector %q takes no argument", typ)
		}
		return detectspec.Detector{Type: typ}, nil
	case "file":
		if arg == "" || !strings.HasPrefix(arg, "/") {
			return detectspec.Detector{}, fmt.Errorf("file detector needs an absolute path, e.g. file:/var/run/reboot-required")
		}
		return detectspec.Detector{Type: typ, Path: arg}, nil
	case "command":
		argv := strings.Fields(arg)
		if len(argv) == 0 {
			return detectspec.Detector{}, fmt.Errorf("command detector needs a command, e.g. command:'needs-restarting -r'")
		}
		return detectspec.Detector{Type: typ, Cmd: argv}, nil
	case "max_uptime":
		days, err := strconv.Atoi(arg)
		if err != nil || days < 1 {
			return detectspec.Detector{}, fmt.Errorf("max_uptime detector needs a number of days, e.g. max_uptime:30")
		}
		return detectspec.Detector{Type: typ, Days: days}, nil
	default:
		return detectspec.Detector{}, fmt.Errorf("unknown detector %q; use auto, kernel, file:PATH, command:ARGV or max_uptime:DAYS", spec)
	}
}
