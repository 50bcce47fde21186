// Package alertgate runs the gate's alert and PromQL checks: no firing
// alert of Alertmanager (its v2 API) or Prometheus (its alerts API) matches
// the configured matchers (gate.alerts), and a PromQL expression returns no
// series or only values within bounds (gate.promql).
//
// Every check fails closed: an unreachable server, a timeout, a non-2xx
// answer, malformed JSON or a PromQL error blocks, with a one-line reason
// naming the URL (its password masked). A blocking check names the alerts
// (alertname and key labels) or the series it saw.
//
// Checker implements gate.Remote. crd-gate and the under-lock phase (in the
// cluster child) call it directly; the daemon, which links no HTTP client,
// runs it through `crd-lock step alerts` (driver/cluster).
package alertgate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/silence/matcher"
)

// maxBody bounds an answer read from Alertmanager.
const maxBody = 16 << 20

// maxNamed bounds the alerts or series named in one reason.
const maxNamed = 5

// Checker runs the alert and PromQL checks of one node.
type Checker struct {
	// Alerts and PromQL are gate.alerts and gate.promql.
	Alerts []config.AlertCheck
	PromQL []config.PromQLCheck
	// Data fills {{.Node}}, {{.Group}} and {{.Lock}} in matchers and
	// expressions.
	Data matcher.Data
	// Client makes the requests (nil: a client with the default transport,
	// which honours HTTP(S)_PROXY and NO_PROXY).
	Client *http.Client
	// Now is the evaluation time of PromQL queries (nil: time.Now).
	Now func() time.Time
}

// New is the Checker of cfg's gate section.
func New(cfg config.Config) Checker {
	return Checker{Alerts: cfg.Gate.Alerts, PromQL: cfg.Gate.PromQL, Data: config.MatcherData(cfg)}
}

// Configured reports whether cfg has an alert or PromQL check; when it has
// none the gate runs no child and no request.
func Configured(cfg config.Config) bool { return cfg.Gate.HasMonitorChecks() }

// Check implements gate.Remote: the checks of phase, in order (alerts, then
// PromQL). The error is set only when ctx ended (exitcode.Interrupted).
func (c Checker) Check(ctx context.Context, phase string) ([]gate.CheckResult, error) {
	var out []gate.CheckResult
	for _, a := range c.Alerts {
		if !config.InPhase(a.Phases, phase) {
			continue
		}
		r := c.alerts(ctx, a)
		if ctx.Err() != nil {
			return out, interrupted(a.URL)
		}
		out = append(out, r)
	}
	for _, q := range c.PromQL {
		if !config.InPhase(q.Phases, phase) {
			continue
		}
		r := c.promql(ctx, q)
		if ctx.Err() != nil {
			return out, interrupted(q.URL)
		}
		out = append(out, r)
	}
	return out, nil
}

func interrupted(url string) error {
	return exitcode.New(exitcode.Interrupted, fmt.Errorf("gate: the check of %s was interrupted: %w", config.RedactURL(url), context.Canceled))
}

func (c Checker) client() *http.Client {
	if c.Client != nil {
		return c.Client
	}
	return &http.Client{}
}

func (c Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// render expands and parses templated matchers.
func (c Checker) render(texts []string) ([]matcher.Matcher, error) {
	out := make([]matcher.Matcher, 0, len(texts))
	for _, t := range texts {
		m, err := matcher.RenderOne(t, c.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func timeout(sec int) time.Duration {
	return time.Duration(config.MonitorTimeoutSec(sec)) * time.Second
}

// unknown is the failing result of a check that got no usable answer.
func unknown(name, url string, err error) gate.CheckResult {
	return gate.CheckResult{Name: name, URL: config.RedactURL(url),
		Reason: scrub(fmt.Sprintf("%s at %s unknown, so not rebooting: %s", name, config.RedactURL(url), describe(err)), url)}
}

// describe is err on one line; a deadline says so plainly.
func describe(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer in time (timeout_sec): " + oneLine(err.Error())
	}
	return oneLine(err.Error())
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = strings.ToValidUTF8(s[:300], "") + "..."
	}
	return s
}

// scrub removes the password of url from s, wherever an error quoted it.
func scrub(s, url string) string {
	_, rest, ok := strings.Cut(url, "://")
	if !ok {
		return s
	}
	at := strings.IndexAny(rest, "/?#")
	if at < 0 {
		at = len(rest)
	}
	user, ok := strings.CutSuffix(rest[:strings.LastIndexByte(rest[:at], '@')+1], "@")
	if !ok {
		return s
	}
	if _, pw, has := strings.Cut(user, ":"); has && pw != "" {
		s = strings.ReplaceAll(s, pw, "***")
	}
	return s
}

// baseURL is url without a trailing slash.
func baseURL(url string) string { return strings.TrimRight(url, "/") }

// named lists at most maxNamed items, then "(+N more)".
func named(items []string) string {
	if len(items) <= maxNamed {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s (+%d more)", strings.Join(items[:maxNamed], ", "), len(items)-maxNamed)
}

// Remote is the gate.Remote of cfg, nil when it has no alert or PromQL check.
func Remote(cfg config.Config) gate.Remote {
	if !Configured(cfg) {
		return nil
	}
	return New(cfg)
}
