package clusterrebootd

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/memtrim"
	"github.com/clusterrebootd/clusterrebootd/lib/notify"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
	"github.com/clusterrebootd/clusterrebootd/lib/version"
)

// runResult is the JSON of run and simulate.
type runResult struct {
	report.Header
	Command string `json:"command"`
	DryRun  bool   `json:"dry_run"`
	*driver.Outcome
	// Cycles is how many cycles the daemon ran (run without --once).
	Cycles int           `json:"cycles,omitempty"`
	Status driver.Status `json:"status"`
}

// Text renders the steps for people.
func (r runResult) Text(w io.Writer) error {
	if r.Outcome == nil {
		report.Line(w, "cycles", r.Cycles)
		report.Line(w, "state", r.Status.String())
		if r.Error != "" {
			report.Line(w, "error", r.Error)
		}
		return nil
	}
	for _, s := range r.Steps {
		line := fmt.Sprintf("step %d %-19s %-5s", s.Step, s.Name, s.Decision)
		if s.Reason != "" {
			line += " [" + s.Reason + "]"
		}
		if s.Detail != "" {
			line += " " + s.Detail
		}
		fmt.Fprintln(w, line)
	}
	verdict := r.Action
	if r.Reason != "" {
		verdict += " (" + r.Reason + ")"
	}
	report.Line(w, "result", verdict)
	if r.Detail != "" {
		report.Line(w, "why", r.Detail)
	}
	report.Line(w, "exit", fmt.Sprintf("%d %s", r.ExitCode, r.ExitName))
	return nil
}

func runCmd(ctx context.Context, b *base, args []string, stdout, stderr io.Writer, simulate bool) error {
	sub := b.sub
	if err := b.parse(args, stdout); err != nil {
		return err
	}
	dryRun, once, noMemTrim := b.dryRun, b.once, b.noMemTrim
	res := runResult{Command: sub, Header: report.Header{Node: b.c.Node}}
	if !simulate && !once && !cli.IsSet(b.fs, "log-format") {
		b.c.LogFormat = "json"
	}
	log, err := b.c.Logger(stderr, Tool)
	if err != nil {
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	override := func(c *config.Config) {
		if dryRun || simulate {
			c.DryRun = true
		}
	}
	cfg, err := b.load(override)
	res.Node = cfg.NodeName
	if err != nil {
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	res.DryRun = cfg.DryRun
	if !simulate {
		lf, err := lockInstance(cfg.StateDir)
		if err == nil {
			err = privateDir("run_dir", cfg.RunDir)
		}
		if err != nil {
			if lf != nil {
				lf.Close()
			}
			return finish(stdout, b.format, &res.Header, &res, err)
		}
		defer lf.Close()
	}
	child, err := b.child(stderr, false)
	if err != nil {
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	deps := driver.Deps{Child: child}.Real(b.root)
	m := driver.NewMetrics(version.Get().Version)
	drv := driver.New(cfg, deps, log, m, nil)

	if simulate || once {
		out := drv.RunOnce(ctx, driver.Mode{Simulate: simulate})
		res.Outcome = &out
		res.Status = drv.Status()
		if cfg.Metrics.Textfile != "" && !simulate {
			if err := m.Registry.WriteFile(cfg.Metrics.Textfile); err != nil {
				log.Warn("cannot write metrics", "event", "metrics_error", "error", err)
			}
		}
		return finish(stdout, b.format, &res.Header, &res, out.Err())
	}

	// One P for the long-running daemon: its goroutines wait for timers,
	// signals and children and never compete for CPU, and with one P a burst
	// of activity, a garbage collection above all, wakes far fewer threads
	// (measured: a third fewer context switches per cycle; docs/performance.md,
	// "Wakeups"). GOMAXPROCS in the environment still wins.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reload := make(chan struct{}, 1)
	go func() {
		for range hup {
			select {
			case reload <- struct{}{}:
			default:
			}
		}
	}()
	d := &driver.Daemon{
		Driver:        drv,
		Log:           log,
		Notify:        notify.New(os.Getenv("NOTIFY_SOCKET")),
		WatchdogEvery: notify.WatchdogInterval(os.Getenv("WATCHDOG_USEC"), os.Getenv("WATCHDOG_PID"), os.Getpid()),
		Reload:        reload,
		LoadConfig:    func() (config.Config, error) { return b.load(override) },
		Rand:          rand.Float64,
		Metrics:       m,
	}
	if !noMemTrim {
		d.MemTrim = func() {
			// Collect and hand free heap pages back now: an idle daemon
			// allocates a little every cycle, and left to itself the heap grows
			// to the collector's 4 MiB minimum before the first collection, and
			// the pages stay resident (docs/performance.md). A collection of a
			// heap this small costs well under a millisecond once a cycle.
			debug.FreeOSMemory()
			if _, err := memtrim.Trim(); err != nil {
				log.Debug("memtrim failed", "error", err)
			}
		}
	}
	if cfg.Metrics.Enabled {
		path := child.(driver.ExecChild).Path
		d.MetricsServer = func(ctx context.Context) error {
			return driver.ServeMetrics(ctx, path, cfg, stderr, log)
		}
	}
	err = d.Run(ctx)
	res.Cycles = d.Cycles()
	res.Status = drv.Status()
	return finish(stdout, b.format, &res.Header, &res, err)
}
