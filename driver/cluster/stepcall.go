package cluster

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/etcd"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// What a step needs before it runs.
type need int

const (
	// needNothing: no configuration (serve-metrics: its stdin is the
	// daemon's liveness pipe).
	needNothing need = iota
	// needConfig: the configuration, no etcd (alerts, check-notifications).
	needConfig
	// needEtcd: the configuration and a connection to etcd.
	needEtcd
)

// handler is one step: its arguments (with their defaults and, by hand,
// their flags), its empty result, what it needs and what it does.
type handler struct {
	need need
	// newCall makes the step's arguments, with their defaults (their
	// flags registered on fs, for by hand), and its empty result.
	newCall func(fs *flag.FlagSet) *stepCall
}

// stepCall is one run of a step: its arguments and result, and the code
// that runs it over them.
type stepCall struct {
	// args points at the step's *Args (a *none for a step without any);
	// res at its result, hdr at the result's header.
	args any
	res  any
	hdr  *report.Header
	run  func(ctx context.Context, s *session) error
}

// step makes the handler of a step with arguments A (registered as flags
// by register; nil for none) and result R, made by newRes.
func step[A, R any](n need, register func(*A, *flag.FlagSet), newRes func() (*R, *report.Header), run func(ctx context.Context, s *session, a A, r *R) error) handler {
	return handler{need: n, newCall: func(fs *flag.FlagSet) *stepCall {
		a := new(A)
		if register != nil {
			register(a, fs)
		}
		r, hdr := newRes()
		c := &stepCall{args: a, res: r, hdr: hdr}
		c.run = func(ctx context.Context, s *session) error { return run(ctx, s, *a, r) }
		return c
	}}
}

// none is the arguments of a step without any: a request's args must be
// empty or {}.
type none struct{}

// steps is the one table of the steps: protocol.Steps() names each of them
// (TestEveryStepHasAHandler).
var steps = map[string]handler{
	protocol.StepPublish: step(needEtcd, (*protocol.PublishArgs).Register, result(func(r *protocol.PublishResult) *report.Header { return &r.Header }),
		func(ctx context.Context, s *session, a protocol.PublishArgs, r *protocol.PublishResult) error {
			return s.publish(ctx, a, r)
		}),
	protocol.StepCycle: step(needEtcd, (*protocol.CycleArgs).Register, func() (*protocol.CycleResult, *report.Header) {
		r := &protocol.CycleResult{}
		r.Outcome = protocol.OutcomeBlocked
		return r, &r.Header
	}, func(ctx context.Context, s *session, a protocol.CycleArgs, r *protocol.CycleResult) error {
		return s.cycle(ctx, a, r)
	}),
	protocol.StepComplete: step(needEtcd, (*protocol.CompleteArgs).Register, result(func(r *protocol.CompleteResult) *report.Header { return &r.Header }),
		func(ctx context.Context, s *session, a protocol.CompleteArgs, r *protocol.CompleteResult) error {
			if a.Keep {
				return s.keepSlot(ctx, r)
			}
			err := s.completeNotify(ctx, r)
			if err == nil {
				s.consumeRequestAfterBoot(ctx)
				s.expireSilencesAfterBoot(ctx, r)
			}
			return err
		}),
	protocol.StepStatus: step[none](needEtcd, nil, func() (*protocol.StatusResult, *report.Header) {
		r := &protocol.StatusResult{View: emptyView(), Lock: lockinfo.Info{Holders: []lockinfo.Entry{}, Waiters: []lockinfo.Entry{}}}
		return r, &r.Header
	}, func(ctx context.Context, s *session, _ none, r *protocol.StatusResult) error { return s.status(ctx, r) }),
	protocol.StepPause:  pauseStep((*session).pause),
	protocol.StepResume: pauseStep((*session).resume),
	protocol.StepHold: step(needEtcd, overrideFlags(true), overrideResult,
		func(ctx context.Context, s *session, a protocol.OverrideArgs, r *protocol.OverrideResult) error {
			return s.hold(ctx, a, r)
		}),
	protocol.StepReleaseHold: step(needEtcd, overrideFlags(false), overrideResult,
		func(ctx context.Context, s *session, a protocol.OverrideArgs, r *protocol.OverrideResult) error {
			return s.releaseHold(ctx, a, r)
		}),
	protocol.StepRequest: step(needEtcd, overrideFlags(true), overrideResult,
		func(ctx context.Context, s *session, a protocol.OverrideArgs, r *protocol.OverrideResult) error {
			return s.request(ctx, a, r)
		}),
	protocol.StepFailure: step(needEtcd, (*protocol.FailureArgs).Register, result(func(r *protocol.FailureResult) *report.Header { return &r.Header }),
		func(ctx context.Context, s *session, a protocol.FailureArgs, r *protocol.FailureResult) error {
			return s.failure(ctx, a, r)
		}),
	protocol.StepReport: step[none](needEtcd, nil, func() (*protocol.ReportResult, *report.Header) {
		r := &protocol.ReportResult{Nodes: []protocol.ReportRow{}}
		return r, &r.Header
	}, func(ctx context.Context, s *session, _ none, r *protocol.ReportResult) error { return s.report(ctx, r) }),
	protocol.StepCheckNotifications: step[none](needConfig, nil, func() (*protocol.CheckNotificationsResult, *report.Header) {
		r := &protocol.CheckNotificationsResult{URLs: []protocol.URLCheck{}}
		return r, &r.Header
	}, func(_ context.Context, s *session, _ none, r *protocol.CheckNotificationsResult) error {
		return checkNotifications(s.cfg, r)
	}),
	protocol.StepAlerts: step(needConfig, (*protocol.AlertsArgs).Register, result(func(r *protocol.AlertsResult) *report.Header { return &r.Header }),
		func(ctx context.Context, s *session, a protocol.AlertsArgs, r *protocol.AlertsResult) error {
			return alerts(ctx, s.cfg, a, r, s.log)
		}),
	protocol.StepServeMetrics: step(needNothing, (*protocol.ServeMetricsArgs).Register, result(func(r *MetricsResult) *report.Header { return &r.Header }),
		func(ctx context.Context, s *session, a protocol.ServeMetricsArgs, r *MetricsResult) error {
			return serveMetrics(ctx, a, s.stdin, r, s.log)
		}),
}

// result makes an empty result R and names its header.
func result[R any](hdr func(*R) *report.Header) func() (*R, *report.Header) {
	return func() (*R, *report.Header) {
		r := new(R)
		return r, hdr(r)
	}
}

func overrideResult() (*protocol.OverrideResult, *report.Header) {
	r := &protocol.OverrideResult{}
	return r, &r.Header
}

// overrideFlags registers hold's and request's flags (withReason), or
// release-hold's.
func overrideFlags(withReason bool) func(*protocol.OverrideArgs, *flag.FlagSet) {
	return func(a *protocol.OverrideArgs, fs *flag.FlagSet) { a.Register(fs, withReason) }
}

// pauseStep is pause or resume.
func pauseStep(run func(*session, context.Context, protocol.PauseArgs, *protocol.PauseResult) error) handler {
	return step(needEtcd, (*protocol.PauseArgs).Register, result(func(r *protocol.PauseResult) *report.Header { return &r.Header }),
		func(ctx context.Context, s *session, a protocol.PauseArgs, r *protocol.PauseResult) error {
			return run(s, ctx, a, r)
		})
}

// commonFlags are the flags every step takes by hand; in a request they
// are its root, log_level and log_format.
type commonFlags struct {
	logLevel, logFormat, root *string
}

func registerCommon(fs *flag.FlagSet, root string) commonFlags {
	return commonFlags{
		logLevel:  fs.String("log-level", "info", "log `level` on stderr: debug, info, warn or error"),
		logFormat: fs.String("log-format", "json", "log `format` on stderr: json, or text (key=value) as the parent's own lines"),
		root:      fs.String("root", root, "file system `root` for the boot id and detector files, as the daemon's --root (tests, containers)"),
	}
}

// parseFlags parses a step's flags: flag.ErrHelp as it is, any other
// mistake as a configuration error.
func parseFlags(fs *flag.FlagSet, flags []string) error {
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

// connect opens the step's session to etcd, under cfg's namespace, each
// request bounded by etcd_dial_timeout_sec. publish, which every node runs
// every interval, opens one connection (etcd.ConnectOne: one TLS handshake
// instead of one per endpoint); the other steps keep one per endpoint, so
// that a lock or slot they hold survives a member that stops answering.
func (s *session) connect(ctx context.Context, step string) error {
	s.ns = s.cfg.Namespace()
	s.rpc = time.Duration(s.cfg.EtcdDialTimeoutSec) * time.Second
	if s.rpc <= 0 {
		s.rpc = 5 * time.Second
	}
	var err error
	if step == protocol.StepPublish {
		s.client, err = etcd.ConnectOne(ctx, s.cfg, "stdin")
	} else {
		s.client, err = etcd.Connect(ctx, s.cfg, "stdin")
	}
	if err != nil {
		s.log.Warn("etcd unreachable", "event", "etcd_unavailable", "error", err.Error())
		return err
	}
	return nil
}

// newSession is a step's session before it connects.
func newSession(cfg config.Config, log *slog.Logger, w world, stdin io.Reader) *session {
	return &session{cfg: cfg, log: log, w: w, stdin: stdin}
}
