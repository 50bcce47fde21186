package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// timeRun runs argv once and returns the time from start to exit. okCodes
// are the exit codes that count as a normal run.
func timeRun(env []string, okCodes []int, argv ...string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		return 0, err
	}
	for _, c := range okCodes {
		if c == code {
			return d, nil
		}
	}
	return 0, fmt.Errorf("%v exited %d", argv, code)
}

// initTrace runs argv once with GODEBUG=inittrace=1 and returns the summed
// clock time of every package's initialisation and that of gopkg.in/yaml.v3
// (its two regexp compiles and tables), in milliseconds.
func initTrace(env []string, argv ...string) (all, yaml float64, err error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(slices.Clone(env), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			return 0, 0, err
		}
	}
	// init PACKAGE @START ms, CLOCK ms clock, BYTES bytes, ALLOCS allocs
	for _, line := range strings.Split(stderr.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[0] != "init" || f[6] != "clock," {
			continue
		}
		v, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			continue
		}
		all += v
		if strings.HasPrefix(f[1], "gopkg.in/yaml") {
			yaml += v
		}
	}
	if all == 0 {
		return 0, 0, fmt.Errorf("%v: no inittrace lines on stderr", argv)
	}
	return all, yaml, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// toolRows times crd-lock hold against etcdctl lock (alternating, so both
// see the same machine), then crd-detect and crd-window against /bin/true
// and a Go program that only exits (the floor for any Go tool).
func (b *bench) toolRows(runs int) ([]row, error) {
	dir := filepath.Join(b.work, "tools")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// An empty config.d, as the packages install it: the tools read it.
	if err := os.MkdirAll(filepath.Join(dir, "config.d"), 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`node_name: bench
reboot_required_detectors: [{type: file, path: %s/reboot-required}]
etcd_endpoints: [%s]
lock_key: /bench/tools/lock
kill_switch_file: %s/disable
`, dir, b.etcd.Endpoint, dir)), 0o644); err != nil {
		return nil, err
	}
	env := append(cleanEnv(), "CRD_CONFIG="+cfg)
	var hold, ctl, detect, window, truth, goFloor, initAll, initYAML []float64
	// The heavy pair first, alternating, so both see the same machine.
	for range runs {
		d, err := timeRun(env, []int{0}, filepath.Join(b.bin, "crd-lock"), "hold", "--config", cfg, "--", "true")
		if err != nil {
			return nil, err
		}
		hold = append(hold, ms(d))
		d, err = timeRun(env, []int{0}, b.etcdctl, "--endpoints="+b.etcd.Endpoint, "lock", "/bench/tools/etcdctl-lock", "--", "true")
		if err != nil {
			return nil, err
		}
		ctl = append(ctl, ms(d))
	}
	// Then the quick ones, in a fresh random order each round: a process's
	// start depends on what ran just before it (docs/performance.md, "How
	// each figure is measured"), and a fixed order would always put the
	// same program after etcdctl.
	quick := []struct {
		samples *[]float64
		ok      []int
		argv    []string
	}{
		{&detect, []int{0, 1}, []string{filepath.Join(b.bin, "crd-detect"), "--config", cfg}},
		{&window, []int{0, 5}, []string{filepath.Join(b.bin, "crd-window"), "--config", cfg}},
		{&truth, []int{0}, []string{"/bin/true"}},
		{&goFloor, []int{0}, []string{filepath.Join(b.benchBin, "floor"), "exit"}},
	}
	rng := rand.New(rand.NewPCG(7, 7)) // fixed seed: the same orders every run
	for range runs {
		for _, i := range rng.Perm(len(quick)) {
			q := quick[i]
			d, err := timeRun(env, q.ok, q.argv...)
			if err != nil {
				return nil, err
			}
			*q.samples = append(*q.samples, ms(d))
		}
	}
	for range runs {
		all, yaml, err := initTrace(env, filepath.Join(b.bin, "crd-detect"), "--config", cfg)
		if err != nil {
			return nil, err
		}
		initAll, initYAML = append(initAll, all), append(initYAML, yaml)
	}
	ctlMedian := median(ctl)
	atMost := func(limit float64) func(float64) bool { return func(m float64) bool { return m <= limit } }
	// The local tools' start-up has no target: it is shown as a ratio to a
	// Go program that only exits, for information (docs/decisions.md).
	return []row{
		{Key: "crdlock_hold", Figure: "`crd-lock hold -- true`, start to exit", Unit: "ms", Samples: hold,
			Target: "≤ etcdctl lock", Pass: atMost(ctlMedian), Peer: "`etcdctl lock L -- true`", PeerSamples: ctl},
		{Key: "crd_detect", Figure: "`crd-detect`, start to exit", Unit: "ms", Samples: detect,
			Peer: "a Go program that only exits", PeerSamples: goFloor},
		{Key: "crd_window", Figure: "`crd-window`, start to exit", Unit: "ms", Samples: window,
			Peer: "a Go program that only exits", PeerSamples: goFloor},
		{Key: "crd_detect_ratio", Figure: "  crd-detect ÷ a Go program that only exits, same round", Unit: "×", Samples: ratio(detect, goFloor),
			Peer: "crd-window ÷ the same", PeerSamples: ratio(window, goFloor)},
		{Key: "crd_detect_init", Figure: "  of which crd-detect's package initialisation (GODEBUG=inittrace=1, summed)", Unit: "ms", Samples: initAll,
			Peer: "gopkg.in/yaml.v3's share", PeerSamples: initYAML},
		{Key: "go_floor_exit", Figure: "  a Go program that only exits (bench/floor exit), start to exit", Unit: "ms", Samples: goFloor,
			Peer: "/bin/true", PeerSamples: truth},
	}, nil
}

// ratio returns a[i] / b[i]: each round ran both once, one after the other
// in a random order, so the ratio is what the tool costs against the Go
// runtime's own start and exit, largely free of the host's load at the time.
func ratio(a, b []float64) []float64 {
	r := make([]float64, min(len(a), len(b)))
	for i := range r {
		r[i] = a[i] / b[i]
	}
	return r
}

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}
