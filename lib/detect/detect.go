// Package detect answers "does this node need a reboot?" from the detectors
// configured in reboot_required_detectors: a marker file (Debian's
// /var/run/reboot-required), a command with declared exit codes (RHEL's
// needs-restarting -r, SUSE's zypper needs-rebooting), the auto preset that
// picks by /etc/os-release, a kernel detector that compares the running
// kernel with the newest installed one, and max_uptime, which bounds uptime.
//
// The daemon calls it in-process and crd-detect wraps it. The world is
// injected through Env (filesystem root, command runner, running kernel), so
// tests need no real /var/run.
//
// The contract (docs/detectors.md): a reboot is required only when at least
// one detector positively says so and no detector failed. Any detector error
// makes the whole check an error (exit code 8, detector_error): a broken
// detector set never causes a reboot, and never silently says "not needed".
package detect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// DefaultTimeout bounds a command detector whose timeout_sec is 0.
const DefaultTimeout = 30 * time.Second

// CommandPath is the PATH every command detector runs with.
const CommandPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Env is the world detectors look at.
type Env struct {
	// Root is the filesystem root that file paths, /etc/os-release and the
	// kernel directories are read under ("" = "/"). Commands still run on
	// the host: Root does not chroot them.
	Root string
	// Runner runs command detectors (nil: proc.Exec).
	Runner proc.Runner
	// Uname returns the running kernel release, as `uname -r` prints it
	// (nil: KernelRelease, the uname(2) of this machine).
	Uname func() (string, error)
}

func (e Env) runner() proc.Runner {
	if e.Runner == nil {
		return proc.Exec{}
	}
	return e.Runner
}

func (e Env) uname() (string, error) {
	if e.Uname == nil {
		return KernelRelease()
	}
	return e.Uname()
}

// Result is what one detector found.
type Result struct {
	// Name labels the detector (the name field, or derived from type and
	// path/cmd); unique within one check.
	Name string `json:"name"`
	// Type is file, command, auto, kernel or max_uptime.
	Type string `json:"type"`
	// Required is the detector's answer; always false when Err is set.
	Required bool `json:"required"`
	// Detail says what the detector saw (the file and its packages, the exit
	// code and first output line, the kernels compared).
	Detail string `json:"detail,omitempty"`
	// Packages lists the packages that asked for the reboot, when the
	// detector knows them (/var/run/reboot-required.pkgs).
	Packages []string `json:"packages,omitempty"`
	// Err is why the detector could not answer; empty when it did.
	Err string `json:"error,omitempty"`
	// DurationMS is how long the detector took.
	DurationMS int64 `json:"duration_ms"`
}

// Detector is one configured reboot-required check.
type Detector interface {
	// Name labels the detector in results, logs and metrics.
	Name() string
	// Type is file, command, auto, kernel or max_uptime.
	Type() string
	// Detect runs the check. It never panics; failures are in Result.Err.
	Detect(ctx context.Context) Result
}

// RebootRequired is the plain kured-style question asked of one detector:
// needed or not, or an error when the detector could not answer.
func RebootRequired(ctx context.Context, d Detector) (bool, error) {
	r := d.Detect(ctx)
	if r.Err != "" {
		return false, exitcode.Errorf(exitcode.DetectorError, "detect: %s: %s", r.Name, r.Err)
	}
	return r.Required, nil
}

// New builds detectors from their configuration. Unknown types, missing
// fields or contradictory exit codes are configuration errors (exit code 2),
// found here once rather than at every check.
func New(specs []detectspec.Detector, env Env) ([]Detector, error) {
	if ps := detectspec.Problems(specs); len(ps) > 0 {
		return nil, exitcode.New(exitcode.Config, errors.New(ps[0].String()))
	}
	ds := make([]Detector, 0, len(specs))
	seen := map[string]int{}
	for _, s := range specs {
		d := newOne(s, env)
		name := d.Name()
		if s.Name == "" {
			// Derived names may repeat (two auto entries); keep labels unique.
			if n := seen[name]; n > 0 {
				name = fmt.Sprintf("%s#%d", name, n+1)
			}
		}
		seen[d.Name()]++
		ds = append(ds, named{Detector: d, name: name})
	}
	return ds, nil
}

// newOne builds one detector of a configuration config.DetectorProblems
// found nothing wrong with.
func newOne(s detectspec.Detector, env Env) Detector {
	switch s.Type {
	case detectspec.TypeFile:
		return newFile(s, env)
	case detectspec.TypeCommand:
		return newCommand(s, env)
	case detectspec.TypeAuto:
		return &auto{name: s.Label(), timeout: timeoutOf(s), env: env}
	case detectspec.TypeKernel:
		return &kernel{name: s.Label(), env: env}
	}
	return &uptime{name: s.Label(), days: s.Days, env: env}
}

// named overrides a detector's name (to keep derived names unique) and
// stamps it on every result.
type named struct {
	Detector
	name string
}

func (n named) Name() string { return n.name }

func (n named) Detect(ctx context.Context) Result {
	r := n.Detector.Detect(ctx)
	r.Name = n.name
	return r
}

// Report is the outcome of one check over all detectors.
type Report struct {
	// RebootRequired is true only when at least one detector said "needed"
	// and none failed (then Err is nil and Code is OK).
	RebootRequired bool
	// Detectors holds every detector's result, in configuration order.
	Detectors []Result
	// Err is nil, or the first detector error coded exitcode.DetectorError
	// (exitcode.Interrupted when ctx ended during the check).
	Err error
}

// Code is the exit code the check maps to: 0 reboot required, 1 not
// required, 8 a detector failed, 130 interrupted.
func (r Report) Code() exitcode.Code {
	switch {
	case r.Err != nil:
		return exitcode.CodeOf(r.Err)
	case r.RebootRequired:
		return exitcode.OK
	default:
		return exitcode.No
	}
}

// Fired returns the results of the detectors that said "needed".
func (r Report) Fired() []Result {
	var out []Result
	for _, d := range r.Detectors {
		if d.Required {
			out = append(out, d)
		}
	}
	return out
}

// Check runs every detector in order (all of them, so the report shows each
// one's answer even after a failure) and combines the answers: required when
// one says so and none failed; any failure makes the report an error.
func Check(ctx context.Context, ds []Detector) Report {
	rep := Report{Detectors: make([]Result, 0, len(ds))}
	if len(ds) == 0 {
		rep.Err = exitcode.Errorf(exitcode.DetectorError, "detect: no detectors configured; set reboot_required_detectors (e.g. [{type: auto}])")
		return rep
	}
	var errs []Result
	required := false
	for _, d := range ds {
		if ctx.Err() != nil {
			rep.Detectors = append(rep.Detectors, Result{Name: d.Name(), Type: d.Type(), Err: "not run: interrupted"})
			continue
		}
		r := d.Detect(ctx)
		if r.Err != "" {
			r.Required = false
			errs = append(errs, r)
		}
		required = required || r.Required
		rep.Detectors = append(rep.Detectors, r)
	}
	switch {
	case ctx.Err() != nil:
		rep.Err = exitcode.Errorf(exitcode.Interrupted, "detect: interrupted (%v); no answer", ctx.Err())
	case len(errs) > 0:
		msg := fmt.Sprintf("detect: detector %s failed: %s", errs[0].Name, errs[0].Err)
		if len(errs) > 1 {
			msg += fmt.Sprintf(" (and %d more)", len(errs)-1)
		}
		if required {
			msg += "; another detector says a reboot is needed, but no reboot is done on a partial answer"
		}
		rep.Err = exitcode.New(exitcode.DetectorError, fmt.Errorf("%s", msg))
	default:
		rep.RebootRequired = required
	}
	return rep
}

func timeoutOf(s detectspec.Detector) time.Duration {
	if s.TimeoutSec > 0 {
		return time.Duration(s.TimeoutSec) * time.Second
	}
	return DefaultTimeout
}

// oneLine collapses whitespace and bounds s for a one-line detail.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

func since(start time.Time) int64 { return time.Since(start).Milliseconds() }
