package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Kinds of idle process.
const (
	kindDaemon   = "daemon"
	kindNoTrim   = "daemon --no-memtrim"
	kindMetrics  = "daemon, metrics.enabled"
	kindTextfile = "daemon, metrics.textfile"
	kindFloor    = "floor (ticker-only Go)"
	kindSlowPub  = "daemon, health_publish_interval_sec 600"
)

// kindNames name the processes of each kind (node names, directories).
var kindNames = map[string]string{kindDaemon: "daemon", kindNoTrim: "notrim", kindMetrics: "metrics",
	kindTextfile: "textfile", kindFloor: "floor", kindSlowPub: "slowpub"}

// idleProc is one idle process and what was sampled of it.
type idleProc struct {
	kind           string
	name           string
	cmd            *exec.Cmd
	pid            int
	rss            []float64 // MiB, one per second
	rssAt          float64   // MiB at the RSS mark
	anonAt, fileAt float64   // RssAnon and RssFile (MiB) at the mark
	// metricsRSS is the serve-metrics child's RSS at the mark.
	metricsRSS float64
	cpu0, cpu1 int64 // own utime+stime, start and end of the CPU window
	cc0, cc1   int64 // waited-for children's
	sw0, sw1   int64 // context switches
	conns      []int // connections to etcd, one per second
}

// idlePlan says how long and how many.
type idlePlan struct {
	rssMark   time.Duration // RSS is read at this age
	cpuStart  time.Duration // the CPU/wakeup window starts here
	cpuWindow time.Duration
	counts    map[string]int
}

// daemonConfig writes a daemon configuration for an idle node.
func (b *bench) daemonConfig(dir, node, kind string) (string, error) {
	for _, d := range []string{"run", "state"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	cfg := fmt.Sprintf(`node_name: %s
reboot_required_detectors: [{type: file, path: %s/reboot-required}]
etcd_endpoints: [%s]
lock_key: /bench/idle/lock
kill_switch_file: %s/disable
state_dir: %s/state
run_dir: %s/run
`, node, dir, b.etcd.Endpoint, dir, dir, dir)
	switch kind {
	case kindMetrics:
		port, err := freePort()
		if err != nil {
			return "", err
		}
		cfg += fmt.Sprintf("metrics: {enabled: true, listen: \"127.0.0.1:%d\"}\n", port)
	case kindTextfile:
		cfg += fmt.Sprintf("metrics: {textfile: %s/clusterrebootd.prom}\n", dir)
	case kindSlowPub:
		cfg += "health_publish_interval_sec: 600\n"
	}
	path := filepath.Join(dir, "config.yaml")
	return path, os.WriteFile(path, []byte(cfg), 0o644)
}

// startIdle starts every idle process of the plan.
func (b *bench) startIdle(p idlePlan) ([]*idleProc, error) {
	var procs []*idleProc
	for _, kind := range []string{kindDaemon, kindFloor, kindNoTrim, kindSlowPub, kindTextfile, kindMetrics} {
		for i := range p.counts[kind] {
			name := fmt.Sprintf("%s-%d", kindNames[kind], i)
			dir := filepath.Join(b.work, "idle", name)
			var cmd *exec.Cmd
			if kind == kindFloor {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return procs, err
				}
				cmd = exec.Command(filepath.Join(b.benchBin, "floor"))
			} else {
				cfg, err := b.daemonConfig(dir, name, kind)
				if err != nil {
					return procs, err
				}
				args := []string{"run", "--config", cfg}
				if kind == kindNoTrim {
					args = append(args, "--no-memtrim")
				}
				cmd = exec.Command(filepath.Join(b.bin, "clusterrebootd"), args...)
			}
			cmd.Env = cleanEnv()
			errf, err := os.Create(filepath.Join(dir, "stderr.log"))
			if err != nil {
				return procs, err
			}
			cmd.Stderr = errf
			cmd.Stdout = errf
			if err := cmd.Start(); err != nil {
				return procs, fmt.Errorf("start %s: %w", name, err)
			}
			errf.Close()
			procs = append(procs, &idleProc{kind: kind, name: name, cmd: cmd, pid: cmd.Process.Pid})
		}
	}
	return procs, nil
}

// sampleIdle samples procs once a second until the plan ends.
func (b *bench) sampleIdle(procs []*idleProc, p idlePlan, start time.Time) {
	total := p.cpuStart + p.cpuWindow
	port := b.etcdPort
	for tick := 0; ; tick++ {
		next := start.Add(time.Duration(tick) * time.Second)
		time.Sleep(time.Until(next))
		age := time.Since(start)
		tree := processTree()
		peers := tcpPeers()
		for _, pr := range procs {
			r, err := rssMiB(pr.pid)
			if err != nil {
				b.warnf("idle: %s (pid %d) is gone: %v", pr.name, pr.pid, err)
				continue
			}
			pr.rss = append(pr.rss, r)
			if pr.kind != kindFloor {
				pr.conns = append(pr.conns, connsTo(descendants(tree, pr.pid), peers, port))
			}
			if pr.rssAt == 0 && age >= p.rssMark {
				pr.rssAt = r
				anon, _ := statusKB(pr.pid, "RssAnon")
				file, _ := statusKB(pr.pid, "RssFile")
				pr.anonAt, pr.fileAt = anon/1024, file/1024
				if pr.kind == kindMetrics {
					for _, c := range descendants(tree, pr.pid)[1:] {
						if strings.Contains(cmdline(c), "serve-metrics") {
							pr.metricsRSS, _ = rssMiB(c)
						}
					}
				}
			}
			if pr.sw0 == 0 && age >= p.cpuStart {
				pr.cpu0, pr.cc0, _ = cpuTicks(pr.pid)
				pr.sw0, _ = ctxSwitches(pr.pid)
			}
		}
		if age >= total {
			for _, pr := range procs {
				pr.cpu1, pr.cc1, _ = cpuTicks(pr.pid)
				pr.sw1, _ = ctxSwitches(pr.pid)
			}
			return
		}
	}
}

// stopIdle ends the idle processes (SIGTERM, then SIGKILL after 5 s).
func stopIdle(procs []*idleProc) {
	for _, pr := range procs {
		_ = pr.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, pr := range procs {
		done := make(chan struct{})
		go func() { _ = pr.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = pr.cmd.Process.Kill()
			<-done
		}
	}
}

// idleRows turns the samples into table rows.
func idleRows(procs []*idleProc, p idlePlan, clkTck float64) []row {
	pick := func(kind string, f func(*idleProc) float64) []float64 {
		var out []float64
		for _, pr := range procs {
			if pr.kind == kind {
				out = append(out, f(pr))
			}
		}
		return out
	}
	mark := fmt.Sprintf("%.0f s", p.rssMark.Seconds())
	win := p.cpuWindow.Seconds()
	rss := func(pr *idleProc) float64 { return pr.rssAt }
	cpu := func(pr *idleProc) float64 { return float64(pr.cpu1-pr.cpu0) / clkTck / win * 100 }
	cpuAll := func(pr *idleProc) float64 { return float64(pr.cpu1+pr.cc1-pr.cpu0-pr.cc0) / clkTck / win * 100 }
	wake := func(pr *idleProc) float64 { return float64(pr.sw1-pr.sw0) / (win / 60) }
	floorRSS := pick(kindFloor, rss)
	var conns []float64
	maxConns, withConn := 0, 0
	for _, pr := range procs {
		if pr.kind != kindDaemon {
			continue
		}
		for _, c := range pr.conns {
			conns = append(conns, float64(c))
			maxConns = max(maxConns, c)
			if c > 0 {
				withConn++
			}
		}
	}
	atMost := func(limit float64) func(float64) bool { return func(m float64) bool { return m <= limit } }
	metricsTotal := pick(kindMetrics, func(pr *idleProc) float64 { return pr.rssAt + pr.metricsRSS })
	return []row{
		{Key: "idle_rss", Figure: "idle VmRSS of clusterrebootd after " + mark, Unit: "MiB", Samples: pick(kindDaemon, rss),
			Target: "≤ 4 (stretch ≤ 3)", Pass: atMost(4), Peer: "floor", PeerSamples: floorRSS},
		{Key: "idle_rss_notrim", Figure: "  the same with --no-memtrim", Unit: "MiB", Samples: pick(kindNoTrim, rss),
			Peer: "floor", PeerSamples: floorRSS},
		{Key: "idle_rss_anon", Figure: "  of which RssAnon (heap, stacks, .bss)", Unit: "MiB", Samples: pick(kindDaemon, func(pr *idleProc) float64 { return pr.anonAt }),
			Peer: "floor", PeerSamples: pick(kindFloor, func(pr *idleProc) float64 { return pr.anonAt })},
		{Key: "idle_rss_file", Figure: "  of which RssFile (pages of the executable)", Unit: "MiB", Samples: pick(kindDaemon, func(pr *idleProc) float64 { return pr.fileAt }),
			Peer: "--no-memtrim", PeerSamples: pick(kindNoTrim, func(pr *idleProc) float64 { return pr.fileAt })},
		{Key: "idle_cpu", Figure: fmt.Sprintf("idle CPU over %.0f s (utime+stime)", win), Unit: "%", Samples: pick(kindDaemon, cpu),
			Target: "≤ 0.05", Pass: atMost(0.05), Peer: "floor", PeerSamples: pick(kindFloor, cpu)},
		{Key: "idle_cpu_children", Figure: "  including its cluster children (cutime+cstime)", Unit: "%", Samples: pick(kindDaemon, cpuAll),
			Note: "the publish child runs every health_publish_interval_sec"},
		{Key: "wakeups", Figure: "idle wakeups (context switches, all threads)", Unit: "/min", Samples: pick(kindDaemon, wake),
			Target: "≤ 120", Pass: atMost(120), Peer: "floor", PeerSamples: pick(kindFloor, wake)},
		{Key: "wakeups_slowpub", Figure: "  the same with health_publish_interval_sec: 600", Unit: "/min", Samples: pick(kindSlowPub, wake),
			Peer: "--no-memtrim", PeerSamples: pick(kindNoTrim, wake)},
		{Key: "etcd_conns", Figure: "etcd connections of an idle node (1 s samples)", Unit: "count", Samples: conns,
			Target: "0", Pass: atMost(0),
			Note: fmt.Sprintf("max %d; %d of %d samples caught a publish child connected", maxConns, withConn, len(conns))},
		{Key: "metrics_child_rss", Figure: "metrics.enabled: serve-metrics child VmRSS", Unit: "MiB", Samples: pick(kindMetrics, func(pr *idleProc) float64 { return pr.metricsRSS })},
		{Key: "metrics_total_rss", Figure: "metrics.enabled: daemon + serve-metrics child", Unit: "MiB", Samples: metricsTotal,
			Peer: "daemon alone", PeerSamples: pick(kindDaemon, rss)},
		{Key: "textfile_rss", Figure: "metrics.textfile: daemon VmRSS", Unit: "MiB", Samples: pick(kindTextfile, rss),
			Peer: "daemon alone", PeerSamples: pick(kindDaemon, rss)},
	}
}
