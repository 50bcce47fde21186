// Package exitcode is the one exit-code table shared by every clusterrebootd
// tool and the daemon. Errors carry their code through the Error type;
// From unwraps any error chain to the number a process should exit with.
//
// The numbers are part of the public contract (docs/exit-codes.md, every man
// page): never renumber, only append.
package exitcode

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
)

// Code is a process exit status with a fixed meaning across all tools.
type Code int

// The table. Explicit numbers, no iota: a code is an API.
const (
	OK                 Code = 0   // the tool's predicate holds / its action was done
	No                 Code = 1   // no reboot is needed
	Config             Code = 2   // bad usage, bad flag, invalid config file
	HealthBlocked      Code = 3   // health gate failed, timed out, or a cluster policy forbids
	LockBusy           Code = 4   // lock not acquired within the allowed time, or lost
	WindowClosed       Code = 5   // inside a deny window or outside every allow window
	KillSwitch         Code = 6   // the kill switch is set
	EtcdUnavailable    Code = 7   // backend unreachable, TLS or auth failure
	DetectorError      Code = 8   // a detector could not run or answered outside its contract
	RebootFailed       Code = 9   // the reboot command or a reboot hook failed, or the marker could not be written
	RebootLoop         Code = 10  // max_reboots_per_day reached; an operator must clear it
	PackageManagerBusy Code = 11  // dpkg/apt, rpm/dnf or zypper is mid-transaction (or was interrupted)
	Internal           Code = 70  // a bug
	Interrupted        Code = 130 // stopped by SIGINT/SIGTERM before finishing (128+SIGINT)
)

// All returns every defined code, in ascending order.
func All() []Code {
	return []Code{OK, No, Config, HealthBlocked, LockBusy, WindowClosed, KillSwitch,
		EtcdUnavailable, DetectorError, RebootFailed, RebootLoop, PackageManagerBusy, Internal, Interrupted}
}

// Name is the stable snake_case name of a code, as printed in JSON as exit_name.
// A switch rather than a map: a package-level map is built at start-up, in
// every tool's initialisation (docs/performance.md, "Figures measured by
// hand").
func (c Code) Name() string {
	switch c {
	case OK:
		return "ok"
	case No:
		return "no"
	case Config:
		return "config"
	case HealthBlocked:
		return "health_blocked"
	case LockBusy:
		return "lock_busy"
	case WindowClosed:
		return "window_closed"
	case KillSwitch:
		return "kill_switch"
	case EtcdUnavailable:
		return "etcd_unavailable"
	case DetectorError:
		return "detector_error"
	case RebootFailed:
		return "reboot_failed"
	case RebootLoop:
		return "reboot_loop"
	case PackageManagerBusy:
		return "package_manager_busy"
	case Internal:
		return "internal"
	case Interrupted:
		return "interrupted"
	}
	return fmt.Sprintf("unknown_%d", int(c))
}

func (c Code) String() string { return c.Name() }

// Error is an error that knows the exit code it maps to.
type Error struct {
	Code Code
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// New wraps err so that From(err) returns code. A nil err yields nil.
func New(code Code, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// Errorf formats an error carrying code; %w wrapping works as in fmt.Errorf.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Err: fmt.Errorf(format, args...)}
}

// CodeOf returns the code carried by err: OK for nil, the code of the
// outermost *Error in the chain; flag.ErrHelp is OK (help was asked for and
// printed); a bare context cancellation is Interrupted; anything else is
// Internal, since every expected failure is supposed to carry its code.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, flag.ErrHelp) {
		return OK
	}
	if errors.Is(err, context.Canceled) {
		return Interrupted
	}
	return Internal
}

// From is CodeOf as an int, ready for os.Exit.
func From(err error) int { return int(CodeOf(err)) }

// PathCause is err without the "op path:" prefix of the *fs.PathError
// inside it (its Err), for messages that already name the file; any other
// error is returned as it is.
func PathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
