package gate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// Names of the built-in checks, as in the gate section of the configuration
// and in Result.Checks.
const (
	CheckNoLoginSessions = "no_login_sessions"
	CheckInactiveUnits   = "inactive_units"
)

// Checks are the opt-in built-in checks of this node. Run runs them before
// the health script in the pre-lock and under-lock phases (not after the
// reboot: they are about not rebooting under a user or a job). They are not
// passed to the script. Each fails closed: state it cannot read blocks.
type Checks struct {
	// NoLoginSessions blocks while /run/utmp lists an interactive login
	// session (USER_PROCESS) whose process is alive.
	NoLoginSessions bool
	// InactiveUnits blocks while `systemctl is-active` says any of these
	// units is active (or activating, reloading, deactivating).
	InactiveUnits []string
	// Root is the filesystem root /run/utmp and /proc are read under
	// ("" = "/"), for tests and containers that mount the host's root.
	Root string
	// Remote, when set, runs the alert and PromQL checks (gate.alerts,
	// gate.promql) after the built-in ones, in every phase.
	Remote Remote
}

// CheckResult is the outcome of one built-in check.
type CheckResult struct {
	// Name is no_login_sessions or inactive_units.
	Name string `json:"name"`
	// Passed is true when the check allows the reboot.
	Passed bool `json:"passed"`
	// Reason says what the check saw, naming the sessions or units.
	Reason string `json:"reason"`
	// URL is the server an alert or PromQL check asked (password masked).
	URL string `json:"url,omitempty"`
	// Blocking names what blocked an alert or PromQL check: the alerts
	// (alertname{key labels}) or the series out of bounds.
	Blocking []string `json:"blocking,omitempty"`
}

// ChecksFromConfig is the gate section of cfg as Checks.
func ChecksFromConfig(cfg config.Config) Checks {
	return Checks{NoLoginSessions: cfg.Gate.NoLoginSessions, InactiveUnits: cfg.Gate.InactiveUnits}
}

// runChecks runs the configured built-in checks. An interruption is
// returned as an error; everything else is in the results.
func runChecks(ctx context.Context, runner proc.Runner, c Checks, timeout time.Duration) ([]CheckResult, error) {
	var out []CheckResult
	if c.NoLoginSessions {
		out = append(out, checkLoginSessions(c.Root))
	}
	if len(c.InactiveUnits) > 0 {
		r, err := checkUnits(ctx, runner, c.InactiveUnits, timeout)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// The glibc utmp record on Linux (the same on amd64, arm64, ppc64le and
// s390x, whose ut_tv is two int32 for 32-bit compatibility): ut_type int16 at
// 0, ut_pid int32 at 4, ut_line [32] at 8, ut_user [32] at 44, ut_host [256]
// at 76; 384 bytes in all.
const (
	utmpRecord      = 384
	utmpUserProcess = 7
)

// session is one interactive login from utmp.
type session struct {
	user, line, host string
	pid              int32
}

func (s session) String() string {
	out := fmt.Sprintf("%s on %s", orUnknown(s.user), orUnknown(s.line))
	if s.host != "" {
		out += " from " + s.host
	}
	return out + fmt.Sprintf(" (pid %d)", s.pid)
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// checkLoginSessions counts the interactive login sessions in root's
// /run/utmp whose process is still alive (utmp keeps the entry of a session
// whose process died without logging out).
func checkLoginSessions(root string) CheckResult {
	res := CheckResult{Name: CheckNoLoginSessions}
	sessions, err := loginSessions(root)
	switch {
	case err != nil:
		res.Reason = fmt.Sprintf("login sessions unknown, so not rebooting: %v", err)
	case len(sessions) == 1:
		res.Reason = "interactive login session open: " + sessions[0].String()
	case len(sessions) > 1:
		names := make([]string, len(sessions))
		for i, s := range sessions {
			names[i] = s.String()
		}
		res.Reason = fmt.Sprintf("%d interactive login sessions open: %s", len(sessions), strings.Join(names, ", "))
	default:
		res.Passed = true
		res.Reason = "no interactive login session"
	}
	return res
}

func loginSessions(root string) ([]session, error) {
	if root == "" {
		root = "/"
	}
	file := filepath.Join(root, "run", "utmp")
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", file, withoutPath(err))
	}
	if len(b)%utmpRecord != 0 {
		return nil, fmt.Errorf("%s is %d bytes, not a whole number of %d-byte glibc utmp records", file, len(b), utmpRecord)
	}
	var out []session
	for off := 0; off < len(b); off += utmpRecord {
		rec := b[off : off+utmpRecord]
		if int16(binary.NativeEndian.Uint16(rec[0:2])) != utmpUserProcess {
			continue
		}
		s := session{
			pid:  int32(binary.NativeEndian.Uint32(rec[4:8])),
			line: cString(rec[8:40]),
			user: cString(rec[44:76]),
			host: cString(rec[76:332]),
		}
		if alive(root, s.pid) {
			out = append(out, s)
		}
	}
	return out, nil
}

// alive reports whether process pid exists under root's /proc. Anything
// but a clear "does not exist" counts as alive (fail closed).
func alive(root string, pid int32) bool {
	if pid <= 0 {
		return true
	}
	_, err := os.Stat(filepath.Join(root, "proc", strconv.Itoa(int(pid))))
	return !errors.Is(err, fs.ErrNotExist)
}

// cString is b up to its first NUL, made printable for a reason line.
func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(string(b), "?"))
}

// idleStates are the `systemctl is-active` answers that let a reboot go on.
var idleStates = map[string]bool{"inactive": true, "failed": true}

// busyStates are the answers of a unit that is running or changing state.
var busyStates = map[string]bool{"active": true, "activating": true, "deactivating": true, "reloading": true, "refreshing": true}

// checkUnits asks `systemctl is-active -- UNIT...` and passes when every
// unit is inactive or failed.
func checkUnits(ctx context.Context, runner proc.Runner, units []string, timeout time.Duration) (CheckResult, error) {
	res := CheckResult{Name: CheckInactiveUnits}
	unknown := func(format string, args ...any) (CheckResult, error) {
		res.Reason = fmt.Sprintf("states of %s unknown, so not rebooting: ", strings.Join(units, ", ")) + fmt.Sprintf(format, args...)
		return res, nil
	}
	for _, u := range units {
		if err := config.ValidUnitName(u); err != nil {
			return unknown("unit name %v", err)
		}
	}
	argv := append([]string{"systemctl", "is-active", "--"}, units...)
	pr := runner.Run(ctx, proc.Spec{Argv: argv, Env: []string{"PATH=" + Path, "LC_ALL=C"}, Dir: "/", Timeout: timeout, MaxOutput: MaxOutput})
	switch {
	case pr.Canceled:
		return res, exitcode.New(exitcode.Interrupted, fmt.Errorf("gate: systemctl is-active stopped: the check was interrupted: %w", context.Canceled))
	case pr.StartErr != nil:
		return unknown("systemctl could not be started: %v", withoutPath(pr.StartErr))
	case pr.TimedOut:
		return unknown("systemctl is-active timed out after %s", timeout)
	case pr.Signal != "":
		return unknown("systemctl is-active killed by signal %s", pr.Signal)
	case pr.ExitCode != 0 && pr.ExitCode != 3: // 3: none is active
		return unknown("systemctl is-active exited %d%s", pr.ExitCode, outputTail(pr))
	}
	states := strings.Fields(pr.Stdout)
	if len(states) != len(units) {
		return unknown("systemctl is-active answered %d states for %d units%s", len(states), len(units), outputTail(pr))
	}
	var busy, strange []string
	for i, st := range states {
		switch {
		case busyStates[st]:
			if st == "active" {
				busy = append(busy, units[i])
			} else {
				busy = append(busy, fmt.Sprintf("%s (%s)", units[i], st))
			}
		case !idleStates[st]:
			strange = append(strange, fmt.Sprintf("%s (%q)", units[i], st))
		}
	}
	switch {
	case len(busy) > 0:
		res.Reason = fmt.Sprintf("unit %s active", strings.Join(busy, ", "))
		if len(busy) > 1 {
			res.Reason = fmt.Sprintf("units %s active", strings.Join(busy, ", "))
		}
	case len(strange) > 0:
		return unknown("unknown state of %s", strings.Join(strange, ", "))
	default:
		res.Passed = true
		res.Reason = fmt.Sprintf("none of %s is active", strings.Join(units, ", "))
	}
	return res, nil
}
