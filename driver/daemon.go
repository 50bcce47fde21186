package driver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/logging"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// MetricsFile is the exposition the daemon writes into run_dir for the
// serve-metrics child when metrics.enabled is set.
const MetricsFile = "metrics.prom"

// Systemd is the channel to systemd: sd_notify (lib/sdnotify), not the
// chat notifications of lib/notifications.
type Systemd interface {
	Ready(status string) error
	Status(status string) error
	Watchdog() error
	Stopping(status string) error
}

// Daemon is the long-running loop: the cycle every check_interval_sec
// (±10 % jitter, backoff with full jitter after a blocked cluster step),
// the health-record publisher, the watchdog, SIGHUP reloads and the
// metrics output, run as one Group.
type Daemon struct {
	Driver *Driver
	Log    *slog.Logger
	// Systemd may be nil (not under systemd, or in tests).
	Systemd Systemd
	// WatchdogEvery is half of WATCHDOG_USEC (0: no watchdog).
	WatchdogEvery time.Duration
	// Reload delivers SIGHUP.
	Reload <-chan struct{}
	// LoadConfig reads and validates the configuration again.
	LoadConfig func() (config.Config, error)
	// Rand returns a number in [0, 1) (jitter).
	Rand func() float64
	// Metrics may be nil.
	Metrics *Metrics
	// MetricsServer, when set, runs the serve-metrics child until ctx ends.
	MetricsServer func(ctx context.Context) error
	// Mode applies to every cycle.
	Mode Mode
	// MemTrim, when set, runs once after each cycle and its publication (or
	// after a publication alone): it returns the executable's clean read-only
	// pages (lib/memtrim).
	MemTrim func()

	// metricsErrs holds back repeated metrics_error lines (under writeMu).
	metricsErrs *Limiter
	// cycleDone tells the publisher a cycle just ended (buffered, one).
	cycleDone chan struct{}

	mu     sync.Mutex
	cycles int
	// writeMu orders metric file writes: a snapshot is renamed into place
	// before a newer one is taken.
	writeMu sync.Mutex
}

// Cycles is the number of cycles run so far.
func (d *Daemon) Cycles() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cycles
}

// Run runs until ctx ends. A clean stop returns nil.
func (d *Daemon) Run(ctx context.Context) error {
	d.cycleDone = make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var g Actors
	g.Add(func() error { <-ctx.Done(); return nil }, func(error) { cancel() })
	g.Add(func() error { d.loop(ctx); return nil }, func(error) { cancel() })
	g.Add(func() error { d.publisher(ctx); return nil }, func(error) { cancel() })
	if d.Reload != nil {
		g.Add(func() error { d.reloader(ctx); return nil }, func(error) { cancel() })
	}
	if d.WatchdogEvery > 0 && d.Systemd != nil {
		g.Add(func() error { d.watchdog(ctx); return nil }, func(error) { cancel() })
	}
	if d.MetricsServer != nil {
		g.Add(func() error { return d.MetricsServer(ctx) }, func(error) { cancel() })
	}
	cfg := d.Driver.Config()
	d.Log.Info("clusterrebootd started", "event", "started", "node", cfg.NodeName, "dry_run", cfg.DryRun,
		"check_interval_sec", cfg.CheckIntervalSec, "config", strings.Join(cfg.Sources(), ","))
	d.tellSystemd(func(n Systemd) error { return n.Ready(d.Driver.Status().String()) })
	// Waiting in line lasts as long as the rollout ahead: systemd hears of
	// it when it begins, not the previous cycle's answer until it ends.
	d.Driver.OnStatus(func(s Status) { d.tellSystemd(func(n Systemd) error { return n.Status(s.String()) }) })
	defer d.Driver.OnStatus(nil)
	err := g.Run()
	d.tellSystemd(func(n Systemd) error { return n.Stopping("stopping") })
	d.Log.Info("clusterrebootd stopped", "event", "stopped", "cycles", d.Cycles())
	return err
}

func (d *Daemon) tellSystemd(f func(Systemd) error) {
	if d.Systemd == nil {
		return
	}
	if err := f(d.Systemd); err != nil {
		d.Log.Debug("sd_notify failed", "error", err)
	}
}

func (d *Daemon) loop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		out := d.Driver.RunOnce(ctx, d.Mode)
		d.mu.Lock()
		d.cycles++
		d.mu.Unlock()
		d.writeMetrics()
		d.tellSystemd(func(n Systemd) error { return n.Status(d.Driver.Status().String()) })
		// The publisher takes over the burst: it publishes if due and trims
		// once for both (each trim is a garbage collection and wakes the idle
		// process's threads). Only when it is still busy with an
		// earlier notice does the loop trim itself.
		select {
		case d.cycleDone <- struct{}{}:
		default:
			d.memTrim()
		}
		if ctx.Err() != nil {
			return
		}
		cfg := d.Driver.Config()
		delay := Jitter(time.Duration(cfg.CheckIntervalSec)*time.Second, d.rand())
		if out.backoff {
			delay = Backoff(cfg, out.Attempt, d.rand())
			d.Log.Debug("backing off", "event", "backoff", "delay_ms", delay.Milliseconds(), "attempt", out.Attempt)
		}
		timer.Reset(delay)
	}
}

func (d *Daemon) memTrim() {
	if d.MemTrim != nil {
		d.MemTrim()
	}
}

func (d *Daemon) rand() float64 {
	if d.Rand == nil {
		return 0.5
	}
	return d.Rand()
}

// Jitter spreads period by ±10 % (r in [0, 1)), so a fleet does not poll in step.
func Jitter(period time.Duration, r float64) time.Duration {
	return time.Duration(float64(period) * (0.9 + 0.2*r))
}

// Backoff is the delay before the next cycle after the attempt-th blocked
// cluster step: full jitter between backoff_min_sec and
// min(backoff_max_sec, backoff_min_sec·2^(attempt-1)).
func Backoff(cfg config.Config, attempt int, r float64) time.Duration {
	lo := time.Duration(cfg.BackoffMinSec) * time.Second
	hi := time.Duration(cfg.BackoffMaxSec) * time.Second
	if attempt < 1 {
		attempt = 1
	}
	ceil := float64(lo) * math.Pow(2, float64(min(attempt-1, 30)))
	if ceil > float64(hi) {
		ceil = float64(hi)
	}
	if ceil < float64(lo) {
		ceil = float64(lo)
	}
	return lo + time.Duration(r*(ceil-float64(lo)))
}

func (d *Daemon) publisher(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	// A failing publication is logged like a blocked cycle: the first time,
	// then a summary with the count every DefaultRepeatEvery, and once when it
	// works again, so an etcd outage over a weekend is a few lines, not one a
	// minute.
	failures := NewLimiter(d.Driver.deps.Now, DefaultRepeatEvery)
	failing := false
	for {
		every := time.Duration(d.Driver.Config().HealthPublishIntervalSec) * time.Second
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.cycleDone:
			// Publish in the same burst of activity as the cycle when at
			// least half an interval has passed since the last publication
			// (PublishedAt, with or without the view): every separate burst costs
			// the idle process runtime wake-ups (docs/performance.md,
			// "Wakeups"). The record stays fresh on its own timer
			// while a cycle waits for the lock.
			if last := d.Driver.PublishedAt(); !last.IsZero() && d.Driver.deps.Now().Sub(last) < every/2 {
				d.memTrim() // on the cycle's behalf
				continue
			}
			t.Stop()
		}
		switch err := d.Driver.Publish(ctx); {
		case err != nil && ctx.Err() == nil:
			failing = true
			if d.Metrics != nil {
				d.Metrics.PublishFailing.Set(1)
			}
			if emit, repeated := failures.Observe(err.Error()); emit {
				attrs := []any{"event", "publish_failed", "error", err}
				if repeated > 0 {
					attrs = append(attrs, "repeated", repeated, "repeat_window", failures.Every().String())
				}
				d.Log.Warn("cannot publish the health record; the node drops out of the cluster view when its lease expires", attrs...)
			}
		case err == nil && failing:
			failing = false
			if d.Metrics != nil {
				d.Metrics.PublishFailing.Set(0)
			}
			failures = NewLimiter(d.Driver.deps.Now, DefaultRepeatEvery)
			d.Log.Info("the health record is published again", "event", "publish_recovered")
		}
		d.writeMetrics()
		d.memTrim()
		t.Reset(Jitter(every, d.rand()))
	}
}

func (d *Daemon) watchdog(ctx context.Context) {
	t := time.NewTicker(d.WatchdogEvery)
	defer t.Stop()
	for {
		d.tellSystemd(func(n Systemd) error { return n.Watchdog() })
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (d *Daemon) reloader(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.Reload:
			d.reload()
		}
	}
}

// reload applies a new configuration: an invalid one is rejected (the old
// one keeps running), restart-only fields keep their value with a warning,
// and a running cluster step is restarted when anything changed.
func (d *Daemon) reload() {
	old := d.Driver.Config()
	next, err := d.LoadConfig()
	if err != nil {
		d.Log.Error("reload rejected: the running configuration stays in effect", "event", "reload_failed", "error", err)
		return
	}
	if changed := config.RestartOnlyChanges(&old, &next); len(changed) > 0 {
		d.Log.Warn("reload: these fields take effect only after a restart (systemctl restart clusterrebootd)",
			"event", "reload_restart_only", "fields", strings.Join(changed, ","))
		config.KeepRestartOnly(&old, &next)
	}
	if sameConfig(old, next) {
		d.Log.Info("reload: configuration unchanged", "event", "reloaded", "changed", false)
		return
	}
	d.Driver.SetConfig(next)
	restart := stepChanged(old, next)
	if restart {
		d.Driver.Interrupt("configuration reloaded")
	}
	d.Log.Info("reload: new configuration in effect from the next cycle", "event", "reloaded", "changed", true,
		"step_restarted", restart)
}

// stepChanged reports whether a running cluster step decides on any field
// that changed. Those only the daemon's loop reads (intervals, the
// publication, metrics), the backoff (the step uses it only to space its
// etcd retries) and the post-reboot path's apply from the next cycle
// without stopping a step, which may be running pre-reboot hooks.
func stepChanged(old, next config.Config) bool {
	strip := func(c config.Config) config.Config {
		c.Metrics = config.Metrics{}
		c.HealthPublishIntervalSec, c.CheckIntervalSec, c.BackoffMinSec, c.BackoffMaxSec = 0, 0, 0, 0
		c.PostRebootHooks, c.SettleSec, c.MaxRebootsPerDay = nil, 0, 0
		return c
	}
	return !sameConfig(strip(old), strip(next))
}

func sameConfig(a, b config.Config) bool {
	x, err1 := yaml.Marshal(a)
	y, err2 := yaml.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// writeMetrics writes the exposition to metrics.textfile and, with
// metrics.enabled, to run_dir/metrics.prom.
func (d *Daemon) writeMetrics() {
	if d.Metrics == nil {
		return
	}
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	cfg := d.Driver.Config()
	state := d.Driver.Status().State
	d.Metrics.SetState(state)
	// The cycle step marks in run_dir the time it holds a seat; a mark left
	// by a step that died counts only while a step runs (state waiting).
	holding := 0.0
	if _, err := os.Stat(filepath.Join(cfg.RunDir, protocol.LockHoldingFile)); err == nil && state == policy.StateWaiting {
		holding = 1
	}
	d.Metrics.LockHolding.Set(holding)
	var paths []string
	if cfg.Metrics.Textfile != "" {
		paths = append(paths, cfg.Metrics.Textfile)
	}
	if cfg.Metrics.Enabled {
		paths = append(paths, filepath.Join(cfg.RunDir, MetricsFile))
	}
	if d.metricsErrs == nil {
		d.metricsErrs = NewLimiter(d.Driver.deps.Now, DefaultRepeatEvery)
	}
	for _, p := range paths {
		err := d.Metrics.Registry.WriteFile(p)
		if err == nil {
			continue
		}
		// Like a failing publication: the first time, then a count every
		// DefaultRepeatEvery; a metrics file that cannot be written is not
		// worth a warning on every cycle and publication.
		// Keyed by file and cause: the message names a temporary file
		// with a new random name each time.
		cause := err
		var pe *fs.PathError
		if errors.As(err, &pe) {
			cause = pe.Err
		}
		if emit, repeated := d.metricsErrs.Observe(p + ": " + cause.Error()); emit {
			attrs := []any{"event", "metrics_error", "error", err}
			if repeated > 0 {
				attrs = append(attrs, "repeated", repeated, "repeat_window", d.metricsErrs.Every().String())
			}
			d.Log.Warn("cannot write metrics", attrs...)
		}
	}
}

// childError is the error a child wrote in its JSON result (in the memfd
// result), else waitErr's text ("exit status 2").
func childError(result *os.File, waitErr error) string {
	var h report.Header
	if result != nil {
		if _, err := result.Seek(0, io.SeekStart); err == nil {
			var out limitedBuffer
			out.max = maxChildOutput
			if _, err := io.Copy(&out, result); err == nil && protocol.DecodeResult(out.Bytes(), &h) == nil && h.Error != "" {
				return h.Error
			}
		}
	}
	if waitErr == nil {
		return "exited 0 while the daemon runs"
	}
	return waitErr.Error()
}

// ServeMetrics runs `crd-lock step serve-metrics` until ctx ends, starting
// it again (after a pause) when it exits early. Unlike the other steps its
// request carries no configuration, and its stdin stays open after the
// request while the daemon runs: its closing (the daemon ended, however)
// stops the server. It is stopped by closing stdin, then SIGTERM.
func ServeMetrics(ctx context.Context, path string, cfg config.Config, stderr io.Writer, log *slog.Logger) error {
	req, err := protocol.NewRequest(protocol.StepServeMetrics, protocol.ServeMetricsArgs{Listen: cfg.Metrics.Listen, File: filepath.Join(cfg.RunDir, MetricsFile)}, nil)
	if err != nil {
		return err
	}
	request, err := req.Encode()
	if err != nil {
		return err
	}
	for {
		cmd := exec.Command(path, protocol.ChildCommand, protocol.StepServeMetrics)
		cmd.Stderr = logging.Unwrap(stderr)
		// Its JSON result, written when it exits, says why (a port in use);
		// the exit status alone does not.
		result := memFile("crd-metrics-result", nil)
		if result != nil {
			cmd.Stdout = result
		}
		in, err := cmd.StdinPipe()
		if err != nil {
			closeFiles(result)
			return err
		}
		if err := cmd.Start(); err != nil {
			log.Error("cannot start the metrics server", "event", "metrics_error", "error", err)
		} else {
			// The request, then nothing: the pipe stays open while the
			// daemon runs (an error here is the child gone: Wait says why).
			_, _ = in.Write(request)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-ctx.Done():
				_ = in.Close()
				t := time.NewTimer(2 * time.Second)
				select {
				case <-done:
				case <-t.C:
					_ = cmd.Process.Signal(syscall.SIGTERM)
					<-done
				}
				t.Stop()
				closeFiles(result)
				return nil
			case err := <-done:
				var ee *exec.ExitError
				if errors.As(err, &ee) || err == nil {
					log.Error("the metrics server exited; starting it again in 10 s", "event", "metrics_error", "error", childError(result, err))
				}
			}
		}
		closeFiles(result)
		t := time.NewTimer(10 * time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
