// Command crdbench measures clusterrebootd's footprint and speed against a
// real etcd and writes docs/performance.md (make bench) and docs/scaling.md
// (make bench-scale). Every figure in those documents comes from its run.
//
//	crdbench run   [-quick] -bin DIR -bench-bin DIR -etcd PATH -etcdctl PATH -doc FILE
//	crdbench scale [-quick] -etcd PATH -doc FILE
//	crdbench admission [-quick] -etcd PATH
//
// -quick (make bench-smoke) runs each measurement once and tiny, and fails
// unless every figure produced numbers.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
)

// bench is one run's environment.
type bench struct {
	bin      string // clusterrebootd, crd-* binaries
	benchBin string // floor, stamp
	etcdBin  string
	etcdctl  string
	work     string
	etcd     *etcdtest.Server
	etcdPort int
	// cluster is the 3-member etcd of make bench-scale, while it runs.
	cluster *etcdCluster
	quick   bool
	// publishers, when not 0, is the most publishing nodes of a full
	// bench-scale run (fullScalePlan's otherwise).
	publishers int
	// loadStart is /proc/loadavg when the run began.
	loadStart string
	warnings  []string
}

func (b *bench) warnf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.warnings = append(b.warnings, msg)
	fmt.Fprintln(os.Stderr, "crdbench: "+msg)
}

func main() {
	if len(os.Args) < 2 || !slices.Contains([]string{"run", "scale", "admission", "queue", "tools"}, os.Args[1]) {
		fmt.Fprintln(os.Stderr, "usage: crdbench run|scale|admission|queue|tools [flags] (see bench/crdbench/main.go)")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("crdbench "+os.Args[1], flag.ExitOnError)
	var b bench
	var doc string
	fs.StringVar(&b.bin, "bin", "bin", "directory of the product binaries")
	fs.StringVar(&b.benchBin, "bench-bin", ".tools/bench", "directory of floor and stamp")
	fs.StringVar(&b.etcdBin, "etcd", ".tools/bin/etcd", "etcd server binary")
	fs.StringVar(&b.etcdctl, "etcdctl", ".tools/bin/etcdctl", "etcdctl binary")
	fs.StringVar(&doc, "doc", "", "write the Markdown report here (SVGs next to it)")
	fs.BoolVar(&b.quick, "quick", false, "smoke run: each measurement once, tiny")
	fs.IntVar(&b.publishers, "publishers", 0, "scale: the most nodes that publish (the rest records kept alive; 0: 10,000)")
	_ = fs.Parse(os.Args[2:])
	if b.publishers < 0 {
		fmt.Fprintf(os.Stderr, "crdbench: -publishers %d: give the most nodes that publish, 1 or more (0: 10,000)\n", b.publishers)
		os.Exit(2)
	}
	var err error
	for _, p := range []*string{&b.bin, &b.benchBin, &b.etcdBin, &b.etcdctl} {
		if *p, err = filepath.Abs(*p); err != nil {
			fatal(err)
		}
	}
	b.work, err = os.MkdirTemp("", "crdbench-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(b.work)
	b.etcd, err = etcdtest.Start(etcdtest.Options{Binary: b.etcdBin, Dir: filepath.Join(b.work, "etcd")})
	if err != nil {
		fatal(fmt.Errorf("starting etcd %s: %w", b.etcdBin, err))
	}
	defer b.etcd.Stop()
	u, err := url.Parse(b.etcd.Endpoint)
	if err == nil {
		b.etcdPort, err = strconv.Atoi(u.Port())
	}
	if err != nil {
		b.etcd.Stop()
		fatal(err)
	}
	ctx := context.Background()
	switch os.Args[1] {
	case "scale":
		err = b.scale(ctx, doc)
	case "admission":
		err = b.admissionOnly(ctx)
	case "queue":
		err = b.queueOnly(ctx)
	case "tools":
		err = b.toolsOnly()
	default:
		err = b.run(ctx, doc)
	}
	if err != nil {
		b.etcd.Stop()
		fatal(fmt.Errorf("%w (files kept in %s)", err, b.work))
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "crdbench:", err)
	os.Exit(1)
}

// cleanEnv is the environment without systemd's notification variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "NOTIFY_SOCKET=") || strings.HasPrefix(kv, "WATCHDOG_") || strings.HasPrefix(kv, "CRD_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// freePort is a port for a server the benchmark starts, below the
// kernel's ephemeral range (etcdtest.FreePort says why).
func freePort() (int, error) { return etcdtest.FreePort() }

// plan is the size of a run.
type plan struct {
	idle       idlePlan
	handovers  int
	toolRuns   int
	queueNodes int
	queueRuns  int
	// lineTrials handovers each with lineShort and lineLong others in line.
	lineTrials, lineShort, lineLong int
}

func fullPlan() plan {
	return plan{
		idle: idlePlan{rssMark: 60 * time.Second, cpuStart: 10 * time.Second, cpuWindow: 120 * time.Second,
			counts: map[string]int{kindDaemon: 5, kindFloor: 5, kindNoTrim: 3, kindMetrics: 3, kindTextfile: 3, kindSlowPub: 3}},
		handovers: 15, toolRuns: 100, queueNodes: 1000, queueRuns: 5,
		lineTrials: 7, lineShort: 10, lineLong: 1000,
	}
}

func quickPlan() plan {
	return plan{
		idle: idlePlan{rssMark: 2 * time.Second, cpuStart: time.Second, cpuWindow: 3 * time.Second,
			counts: map[string]int{kindDaemon: 1, kindFloor: 1, kindNoTrim: 1, kindMetrics: 1, kindTextfile: 1, kindSlowPub: 1}},
		handovers: 1, toolRuns: 1, queueNodes: 20, queueRuns: 1,
		lineTrials: 1, lineShort: 10, lineLong: 100,
	}
}

// run measures everything of docs/performance.md: first the active
// measurements one after another, then the idle processes side by side, so
// that neither disturbs the other (start-to-exit times suffer from background
// activity; an idle process's wakeups include involuntary context switches,
// which a busy machine adds).
func (b *bench) run(ctx context.Context, doc string) error {
	p := fullPlan()
	if b.quick {
		p = quickPlan()
	}
	started := time.Now()
	b.loadStart = loadAvg()

	// The active figures first, on a machine where nothing of ours runs but
	// etcd: start-to-exit times and handovers are sensitive to any background
	// activity (idle daemons forking publish children made crd-detect's
	// start measurably slower: docs/performance.md, "Figures measured by
	// hand"). The idle processes come after, alone.
	c, err := b.etcd.Client(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	var handovers []float64
	for i := range p.handovers {
		d, err := b.handoverTrial(ctx, c, i, 0, 0)
		if err != nil {
			return err
		}
		handovers = append(handovers, ms(d))
		fmt.Fprintf(os.Stderr, "crdbench: handover %d: %.1f ms\n", i, ms(d))
	}
	// Alternating, so that a drift of the machine's load affects both: a
	// short and a long line in a fleet of lineLong nodes (the line's cost),
	// and the short line in a fleet of its own size (line and fleet grow
	// together: the records' cost too, which the admission's bounded read
	// should not feel).
	var lineShort, lineLong, lineSmall []float64
	for i := range p.lineTrials {
		for _, t := range []struct {
			line, fleet int
			into        *[]float64
		}{{p.lineShort, p.lineLong, &lineShort}, {p.lineLong, p.lineLong, &lineLong}, {p.lineShort, p.lineShort, &lineSmall}} {
			d, err := b.handoverTrial(ctx, c, i, t.line, t.fleet)
			if err != nil {
				return err
			}
			*t.into = append(*t.into, ms(d))
			fmt.Fprintf(os.Stderr, "crdbench: handover %d with %d in line, %d records: %.1f ms\n", i, t.line, t.fleet, ms(d))
		}
	}
	tools, err := b.toolRows(p.toolRuns)
	if err != nil {
		return err
	}
	var queues []queueResult
	for run := range p.queueRuns {
		q, err := b.queueRun(ctx, p.queueNodes, run)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "crdbench: %d nodes through one lock: %.0f handovers/s, fifo %v, overlaps %d\n", q.nodes, q.perSecond, q.fifo, q.overlap)
		queues = append(queues, q)
	}

	idleStarted := time.Now()
	procs, err := b.startIdle(p.idle)
	defer stopIdle(procs)
	if err != nil {
		return err
	}
	b.sampleIdle(procs, p.idle, idleStarted)
	stopIdle(procs)
	procs2 := procs
	procs = nil

	clk := clkTck()
	rows := idleRows(procs2, p.idle, clk)
	var lockHandovers, perSec, peaks, before, overlaps []float64
	fifo := 0
	for _, q := range queues {
		lockHandovers = append(lockHandovers, q.handoversMS...)
		perSec = append(perSec, q.perSecond)
		peaks = append(peaks, q.etcdPeak)
		before = append(before, q.etcdBefore)
		overlaps = append(overlaps, float64(q.overlap))
		if q.fifo {
			fifo++
		}
	}
	qn := fmt.Sprintf("%d nodes", p.queueNodes)
	active := []row{
		{Key: "handover", Figure: "handover: slot released → next node's reboot_command (real daemons)", Unit: "ms", Samples: handovers,
			Target: "≤ 100", Pass: func(m float64) bool { return m <= 100 }, Peer: "lib/lock release → next holder", PeerSamples: lockHandovers},
		{Key: "handover_line", Figure: fmt.Sprintf("  the same with %d others in line behind it, %d records", p.lineLong, p.lineLong), Unit: "ms", Samples: lineLong,
			Target: fmt.Sprintf("≤ 2 × with %d", p.lineShort), Pass: func(m float64) bool { return m <= 2*median(lineShort) },
			Peer: fmt.Sprintf("%d in line, %d records", p.lineShort, p.lineLong), PeerSamples: lineShort},
		{Key: "handover_fleet", Figure: fmt.Sprintf("  the same with %d in line of a fleet of %d (records and line grow together)", p.lineLong, p.lineLong), Unit: "ms", Samples: lineLong,
			Target: fmt.Sprintf("≤ 2 × %d of %d", p.lineShort, p.lineShort), Pass: func(m float64) bool { return m <= 2*median(lineSmall) },
			Peer: fmt.Sprintf("%d in line of %d", p.lineShort, p.lineShort), PeerSamples: lineSmall},
	}
	active = append(active, tools...)
	active = append(active,
		row{Key: "queue_rate", Figure: qn + " queued on one lock, passing through", Unit: "handovers/s", Samples: perSec,
			Target: "≥ 300", Pass: func(m float64) bool { return m >= 300 }},
		row{Key: "queue_overlap", Figure: "  holders overlapping (FIFO kept in " + strconv.Itoa(fifo) + " of " + strconv.Itoa(len(queues)) + " runs)", Unit: "count", Samples: overlaps,
			Target: "0, FIFO", Pass: func(m float64) bool { return m == 0 && fifo == len(queues) }},
		row{Key: "queue_etcd_rss", Figure: "  etcd VmRSS, peak during the run", Unit: "MiB", Samples: peaks, Peer: "etcd before the run", PeerSamples: before},
	)
	// Order: idle figures, active figures, then the metrics variants.
	all := append(append(rows[:9:9], active...), rows[9:]...)
	fmt.Print(textTable(all))
	for _, w := range b.warnings {
		fmt.Println("warning:", w)
	}
	if b.quick {
		var bad []string
		for _, r := range all {
			if len(r.Samples) == 0 || math.IsNaN(median(r.Samples)) || (r.Peer != "" && len(r.PeerSamples) == 0) {
				bad = append(bad, r.Figure)
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("smoke: no numbers for: %s", strings.Join(bad, "; "))
		}
		fmt.Printf("bench-smoke: all %d figures produced numbers (%s)\n", len(all), time.Since(started).Round(time.Second))
	}
	if doc == "" {
		return nil
	}
	return b.writePerformance(doc, all, procs2, handovers, lockHandovers, p, time.Since(started))
}

// queueOnly runs the queue figure alone (make bench-queue), to iterate on
// the lock's handover path without the six-minute run.
func (b *bench) queueOnly(ctx context.Context) error {
	p := fullPlan()
	if b.quick {
		p = quickPlan()
	}
	for run := range p.queueRuns {
		q, err := b.queueRun(ctx, p.queueNodes, run)
		if err != nil {
			return err
		}
		fmt.Printf("%d nodes through one lock: %.0f handovers/s (handover median %.2f ms, p95 %.2f ms), fifo %v, overlaps %d, etcd peak %.1f MiB\n",
			q.nodes, q.perSecond, median(q.handoversMS), p95(q.handoversMS), q.fifo, q.overlap, q.etcdPeak)
	}
	return nil
}

// toolsOnly runs the start-to-exit figures alone (make bench-tools-time), to
// iterate on the tools' start-up in a fraction of a full run.
func (b *bench) toolsOnly() error {
	p := fullPlan()
	if b.quick {
		p = quickPlan()
	}
	rows, err := b.toolRows(p.toolRuns)
	if err != nil {
		return err
	}
	fmt.Print(textTable(rows))
	return nil
}

// loadAvg is the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// clkTck is the kernel's clock tick rate (USER_HZ) for /proc/PID/stat.
func clkTck() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && v > 0 {
			return v
		}
	}
	return 100
}
