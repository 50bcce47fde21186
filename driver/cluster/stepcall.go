package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/etcd"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// stepCall is one `crd-lock step NAME` command line: the step's flags and
// the result it fills.
type stepCall struct {
	name string
	fs   *flag.FlagSet

	logLevel, logFormat, root *string

	publishArgs driver.PublishArgs
	cycleArgs   driver.CycleArgs
	pauseArgs   driver.PauseArgs
	overArgs    driver.OverrideArgs
	compArgs    driver.CompleteArgs
	metricsArgs driver.ServeMetricsArgs
	alertsArgs  driver.AlertsArgs
	failArgs    driver.FailureArgs

	// res is the step's result (a pointer to one of the *Result types);
	// hdr is its header.
	res any
	hdr *report.Header
}

// newStepCall registers step name's flags and makes its empty result; it
// returns nil for an unknown step.
func newStepCall(name string, stderr io.Writer, w world) *stepCall {
	c := &stepCall{name: name, fs: flag.NewFlagSet("crd-lock step "+name, flag.ContinueOnError)}
	fs := c.fs
	fs.SetOutput(stderr)
	c.logLevel = fs.String("log-level", "info", "log `level` on stderr: debug, info, warn or error")
	c.logFormat = fs.String("log-format", "json", "log `format` on stderr: json, or text (key=value) as the parent's own lines")
	c.root = fs.String("root", w.root, "file system `root` for the boot id and detector files, as the daemon's --root (tests, containers)")

	switch name {
	case driver.StepPublish:
		c.publishArgs.Register(fs)
		r := &driver.PublishResult{}
		c.res, c.hdr = r, &r.Header
	case driver.StepCycle:
		c.cycleArgs.Register(fs)
		r := &CycleResult{}
		r.Outcome = driver.OutcomeBlocked
		c.res, c.hdr = r, &r.Header
	case driver.StepComplete:
		c.compArgs.Register(fs)
		r := &driver.CompleteResult{}
		c.res, c.hdr = r, &r.Header
	case driver.StepStatus:
		r := &driver.StatusResult{View: emptyView(), Lock: driver.LockStatus{Holders: []driver.LockEntry{}, Waiters: []driver.LockEntry{}}}
		c.res, c.hdr = r, &r.Header
	case driver.StepPause, driver.StepResume:
		c.pauseArgs.Register(fs)
		r := &driver.PauseResult{}
		c.res, c.hdr = r, &r.Header
	case driver.StepHold, driver.StepReleaseHold, driver.StepRequest:
		c.overArgs.Register(fs, name != driver.StepReleaseHold)
		r := &driver.OverrideResult{}
		c.res, c.hdr = r, &r.Header
	case driver.StepCheckNotifications:
		r := &driver.CheckNotificationsResult{URLs: []driver.URLCheck{}}
		c.res, c.hdr = r, &r.Header
	case driver.StepFailure:
		c.failArgs.Register(fs)
		r := &driver.FailureResult{}
		c.res, c.hdr = r, &r.Header
	case driver.StepReport:
		r := &driver.ReportResult{Nodes: []driver.ReportRow{}}
		c.res, c.hdr = r, &r.Header
	case driver.StepServeMetrics:
		c.metricsArgs.Register(fs)
		r := &MetricsResult{}
		c.res, c.hdr = r, &r.Header
	case driver.StepAlerts:
		c.alertsArgs.Register(fs)
		r := &driver.AlertsResult{}
		c.res, c.hdr = r, &r.Header
	default:
		return nil
	}
	c.hdr.Tool = Tool
	return c
}

// parse parses the step's flags: flag.ErrHelp as it is, any other mistake
// as a configuration error.
func (c *stepCall) parse(flags []string) error {
	fs := c.fs
	if err := fs.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return exitcode.Errorf(exitcode.Config, "%s: %v (see %s --help)", fs.Name(), err, fs.Name())
	}
	if fs.NArg() > 0 {
		return exitcode.Errorf(exitcode.Config, "%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// connect opens the step's session: its connection to etcd, under cfg's
// namespace, each request bounded by etcd_dial_timeout_sec. publish, which
// every node runs every interval, opens one connection (etcd.ConnectOne:
// one TLS handshake instead of one per endpoint); the other steps keep one
// per endpoint, so that a lock or slot they hold survives a member that
// stops answering.
func connect(ctx context.Context, cfg config.Config, log *slog.Logger, w world, step string) (*session, error) {
	s := &session{cfg: cfg, log: log, w: w, ns: cfg.Namespace(), rpc: time.Duration(cfg.EtcdDialTimeoutSec) * time.Second}
	if s.rpc <= 0 {
		s.rpc = 5 * time.Second
	}
	var err error
	if step == driver.StepPublish {
		s.client, err = etcd.ConnectOne(ctx, cfg, "stdin")
	} else {
		s.client, err = etcd.Connect(ctx, cfg, "stdin")
	}
	if err != nil {
		log.Warn("etcd unreachable", "event", "etcd_unavailable", "error", err.Error())
		return nil, err
	}
	return s, nil
}

// run runs the step that talks to etcd and fills its result.
func (s *session) run(ctx context.Context, c *stepCall) error {
	res := c.res
	switch c.name {
	case driver.StepPublish:
		return s.publish(ctx, c.publishArgs, res.(*driver.PublishResult))
	case driver.StepCycle:
		return s.cycle(ctx, c.cycleArgs, res.(*CycleResult))
	case driver.StepComplete:
		if c.compArgs.Keep {
			return s.keepSlot(ctx, res.(*driver.CompleteResult))
		}
		err := s.completeNotify(ctx, res.(*driver.CompleteResult))
		if err == nil {
			s.consumeRequestAfterBoot(ctx)
			s.expireSilencesAfterBoot(ctx, res.(*driver.CompleteResult))
		}
		return err
	case driver.StepStatus:
		return s.status(ctx, res.(*driver.StatusResult))
	case driver.StepPause:
		return s.pause(ctx, c.pauseArgs, res.(*driver.PauseResult))
	case driver.StepResume:
		return s.resume(ctx, c.pauseArgs, res.(*driver.PauseResult))
	case driver.StepHold:
		return s.hold(ctx, c.overArgs, res.(*driver.OverrideResult))
	case driver.StepReleaseHold:
		return s.releaseHold(ctx, c.overArgs, res.(*driver.OverrideResult))
	case driver.StepRequest:
		return s.request(ctx, c.overArgs, res.(*driver.OverrideResult))
	case driver.StepFailure:
		return s.failure(ctx, c.failArgs, res.(*driver.FailureResult))
	case driver.StepReport:
		return s.report(ctx, res.(*driver.ReportResult))
	}
	return fmt.Errorf("crd-lock step: no etcd step %q", c.name)
}
