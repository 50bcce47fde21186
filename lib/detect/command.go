package detect

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// maxDetail bounds the command output quoted in a result.
const maxDetail = 200

// commandEnv is the complete environment of a command detector: a fixed
// PATH and the C locale (stable, parseable messages), nothing else and
// nothing secret.
func commandEnv() []string { return []string{"PATH=" + CommandPath, "LC_ALL=C"} }

// commandDetector runs argv (no shell) and maps its exit code: one in
// needed means a reboot is required, one in notNeeded means it is not;
// anything else — not found, not executable, killed, timed out, another
// exit code — is an error, never either answer.
type commandDetector struct {
	name      string
	argv      []string
	needed    []int
	notNeeded []int
	timeout   time.Duration
	env       Env
}

func newCommand(s detectspec.Detector, env Env) Detector {
	needed, notNeeded := s.ExitCodes()
	return &commandDetector{
		name:      s.Label(),
		argv:      slices.Clone(s.Cmd),
		needed:    slices.Clone(needed),
		notNeeded: slices.Clone(notNeeded),
		timeout:   timeoutOf(s),
		env:       env,
	}
}

func (c *commandDetector) Name() string { return c.name }
func (c *commandDetector) Type() string { return detectspec.TypeCommand }

func (c *commandDetector) Detect(ctx context.Context) Result {
	start := time.Now()
	r := c.run(ctx)
	r.Name, r.Type = c.name, detectspec.TypeCommand
	r.DurationMS = since(start)
	return r
}

// run is the command check, shared with the auto preset.
func (c *commandDetector) run(ctx context.Context) Result {
	var r Result
	argv := strings.Join(c.argv, " ")
	res := c.env.runner().Run(ctx, proc.Spec{
		Argv:      c.argv,
		Env:       commandEnv(),
		Dir:       "/",
		Timeout:   c.timeout,
		MaxOutput: 16 << 10,
	})
	out := oneLine(res.Stdout+" "+res.Stderr, maxDetail)
	switch {
	case res.NotFound():
		r.Err = fmt.Sprintf("%s: %s not found (PATH=%s); install it or configure another detector", argv, c.argv[0], CommandPath)
	case res.StartErr != nil:
		r.Err = fmt.Sprintf("%s: cannot start: %v", argv, res.StartErr)
	case res.TimedOut:
		r.Err = fmt.Sprintf("%s: timed out after %s and was killed; raise timeout_sec or fix the command", argv, c.timeout)
	case res.Canceled:
		r.Err = fmt.Sprintf("%s: interrupted", argv)
	case res.Signal != "":
		r.Err = fmt.Sprintf("%s: killed by signal %s", argv, res.Signal)
	case slices.Contains(c.needed, res.ExitCode):
		r.Required = true
		r.Detail = fmt.Sprintf("%s exited %d (reboot needed)", argv, res.ExitCode)
	case slices.Contains(c.notNeeded, res.ExitCode):
		r.Detail = fmt.Sprintf("%s exited %d (no reboot needed)", argv, res.ExitCode)
	case res.ExitCode == 126 || res.ExitCode == 127:
		r.Err = fmt.Sprintf("%s exited %d: a program it runs was not found or not executable; install it or configure another detector", argv, res.ExitCode)
	default:
		r.Err = fmt.Sprintf("%s exited %d, which is in neither success_exit_codes %v (needed) nor not_needed_exit_codes %v; fix the command or declare the code", argv, res.ExitCode, c.needed, c.notNeeded)
	}
	if out != "" {
		if r.Err != "" {
			r.Err += "; output: " + out
		} else {
			r.Detail += ": " + out
		}
	}
	return r
}
