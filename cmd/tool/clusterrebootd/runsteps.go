package clusterrebootd

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/memtrim"
	"github.com/clusterrebootd/clusterrebootd/lib/sdnotify"
)

// claimStateDir makes this the one `run` of cfg's state_dir (an flock on
// its lock file, closed by the caller when the daemon ends) and checks that
// run_dir is private.
func claimStateDir(cfg config.Config) (io.Closer, error) {
	lf, err := lockInstance(cfg.StateDir)
	if err == nil {
		err = privateDir("run_dir", cfg.RunDir)
	}
	if err != nil {
		if lf != nil {
			lf.Close()
		}
		return nil, err
	}
	return lf, nil
}

// cycleOnce is `run --once` and `simulate`: one cycle, its outcome and the
// status in res, the textfile metrics written after a real cycle.
func cycleOnce(ctx context.Context, drv *driver.Driver, m *driver.Metrics, cfg config.Config, log *slog.Logger, simulate bool, res *runResult) error {
	out := drv.RunOnce(ctx, driver.Mode{Simulate: simulate})
	res.Outcome = &out
	res.Status = drv.Status()
	if cfg.Metrics.Textfile != "" && !simulate {
		if err := m.Registry.WriteFile(cfg.Metrics.Textfile); err != nil {
			log.Warn("cannot write metrics", "event", "metrics_error", "error", err)
		}
	}
	return out.Err()
}

// daemonSetup is what the long-running daemon is built from.
type daemonSetup struct {
	drv       *driver.Driver
	metrics   *driver.Metrics
	cfg       config.Config
	log       *slog.Logger
	child     driver.Child
	load      func() (config.Config, error)
	noMemTrim bool
	stderr    io.Writer
	// getenv reads GOMAXPROCS and systemd's NOTIFY_SOCKET, WATCHDOG_USEC
	// and WATCHDOG_PID (os.Getenv).
	getenv func(string) string
}

// newDaemon builds the daemon of s: one P, SIGHUP as a reload (stop ends
// that), systemd notify and watchdog, memtrim after each cycle, the metrics
// server when metrics.enabled.
func newDaemon(s daemonSetup) (d *driver.Daemon, stop func()) {
	// One P for the long-running daemon: its goroutines wait for timers,
	// signals and children and never compete for CPU, and with one P a burst
	// of activity, a garbage collection above all, wakes far fewer threads
	// (docs/performance.md, "Wakeups" and "Figures measured by hand").
	// GOMAXPROCS in the environment still wins.
	if s.getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{}, 1)
	go func() {
		for range hup {
			select {
			case reload <- struct{}{}:
			default:
			}
		}
	}()
	d = &driver.Daemon{
		Driver:        s.drv,
		Log:           s.log,
		Systemd:       sdnotify.New(s.getenv("NOTIFY_SOCKET")),
		WatchdogEvery: sdnotify.WatchdogInterval(s.getenv("WATCHDOG_USEC"), s.getenv("WATCHDOG_PID"), os.Getpid()),
		Reload:        reload,
		LoadConfig:    s.load,
		Rand:          rand.Float64,
		Metrics:       s.metrics,
	}
	if !s.noMemTrim {
		log := s.log
		d.MemTrim = func() {
			// Collect and hand free heap pages back now: an idle daemon
			// allocates a little every cycle, and left to itself the heap grows
			// to the collector's 4 MiB minimum before the first collection, and
			// the pages stay resident (docs/performance.md). A collection of a
			// heap this small is cheap (docs/soak.md).
			debug.FreeOSMemory()
			if _, err := memtrim.Trim(); err != nil {
				log.Debug("memtrim failed", "error", err)
			}
		}
	}
	if s.cfg.Metrics.Enabled {
		path, cfg, stderr, log := s.child.(driver.ExecChild).Path, s.cfg, s.stderr, s.log
		d.MetricsServer = func(ctx context.Context) error {
			return driver.ServeMetrics(ctx, path, cfg, stderr, log)
		}
	}
	return d, func() { signal.Stop(hup) }
}
