package robustness

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// shortSeeds is the seed set of make test (and make unit, under -race):
// nineteen schedules, seconds on two cores. Seeds 1 to 16; 19: waves, and
// the health records of two nodes gone for ever run out
// (drawRecordEnds); 58: both groups halted at once and a resume of one of
// them (drawHaltedGroups), the schedule that finds a group's resume
// acknowledging the other group's failures; 182: waves with
// wave_bake_sec, the schedule that finds a later wave admitted while a
// lower wave's completion bakes. Seeds 5, 8, 9, 10, 12 and 15 run waves
// (drawWaves), 5, 9, 10 and 15 with a bake time.
func shortSeeds() []uint64 {
	var out []uint64
	for s := uint64(1); s <= 16; s++ {
		out = append(out, s)
	}
	return append(out, 19, 58, 182)
}

// runSeed runs scenario sc (of seed) in a namespace of its own.
func runSeed(t *testing.T, sc Scenario, run string) *Report {
	t.Helper()
	ns := fmt.Sprintf("/robustness/%s/%d-%s/", strings.ReplaceAll(t.Name(), "/", "-"), sc.Seed, run)
	rep, err := Run(context.Background(), endpoint, ns, sc)
	if err != nil {
		t.Fatalf("seed %d: %v", sc.Seed, err)
	}
	return rep
}

// judge fails t for what rep found: every violation, whatever explains it.
func judge(t *testing.T, rep *Report, _ bool) {
	t.Helper()
	if rep.Err != nil || len(rep.Violations) > 0 {
		t.Errorf("%s\nthe schedule's last lines:\n%s", rep.Summary(), rep.Trace.Tail(60))
	}
}

// The short seed set: every invariant on every schedule of each seed.
// ROBUSTNESS_SEED=N runs seed N alone and prints its whole schedule.
func TestRobustness(t *testing.T) {
	seeds, verbose := shortSeeds(), false
	if s := os.Getenv("ROBUSTNESS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ROBUSTNESS_SEED=%q is not a seed: give the number a failing run printed, e.g. ROBUSTNESS_SEED=42", s)
		}
		seeds, verbose = []uint64{n}, true
	}
	var stats Stats
	steps := 0
	for _, seed := range seeds {
		rep := runSeed(t, Generate(seed), "a")
		stats, steps = stats.Add(rep.Stats), steps+rep.Steps
		if verbose {
			t.Logf("seed %d, %d steps: %s\nschedule:\n%s", seed, rep.Steps, rep.Scenario, rep.Trace)
			for _, n := range Notes(rep.Rules, rep.Events) {
				t.Logf("note: %s", n)
			}
		}
		judge(t, rep, verbose)
	}
	t.Logf("%d schedules, %d steps: %s", len(seeds), steps, stats)
}

// A seed replays exactly, and the nodes' clocks play no part: the same
// seed with every clock true takes the same schedule.
func TestSchedulesReplay(t *testing.T) {
	for _, seed := range []uint64{3} {
		sc := Generate(seed)
		first, again := runSeed(t, sc, "first"), runSeed(t, sc, "again")
		sc.NoSkew = true
		clocks := runSeed(t, sc, "noskew")
		sameSchedule(t, seed, "run again", first, again)
		sameSchedule(t, seed, "with every clock true", first, clocks)
	}
}

func sameSchedule(t *testing.T, seed uint64, what string, a, b *Report) {
	t.Helper()
	x, y := a.Trace.Canonical(), b.Trace.Canonical()
	for i := range min(len(x), len(y)) {
		if x[i] != y[i] {
			t.Errorf("seed %d %s took another schedule from line %d:\n  %s\n  %s\n(a harness defect if the clocks are true: something outside the scheduler decided; lib/testonly/robustness)", seed, what, i+1, x[i], y[i])
			return
		}
	}
	if len(x) != len(y) {
		t.Errorf("seed %d %s: %d lines of schedule, then %d", seed, what, len(x), len(y))
	}
}

// The long exploration (make robustness): seeds from ROBUSTNESS_FIRST_SEED
// (default: drawn from the time, and printed) for ROBUSTNESS_DURATION or
// ROBUSTNESS_SEEDS schedules; every tenth seed is run twice and must
// replay exactly.
func TestRobustnessLong(t *testing.T) {
	dur, count := os.Getenv("ROBUSTNESS_DURATION"), os.Getenv("ROBUSTNESS_SEEDS")
	if dur == "" && count == "" {
		t.Skip("the long exploration runs with make robustness (ROBUSTNESS_DURATION=10m or ROBUSTNESS_SEEDS=N)")
	}
	var limit time.Duration
	seeds := 0
	var err error
	if dur != "" {
		if limit, err = time.ParseDuration(dur); err != nil {
			t.Fatalf("ROBUSTNESS_DURATION=%q is not a duration: give e.g. 10m or 2h", dur)
		}
	}
	if count != "" {
		if seeds, err = strconv.Atoi(count); err != nil || seeds < 1 {
			t.Fatalf("ROBUSTNESS_SEEDS=%q is not a number of seeds: give e.g. 500", count)
		}
	}
	first := uint64(time.Now().UnixNano()%1_000_000_000) + 1000
	if s := os.Getenv("ROBUSTNESS_FIRST_SEED"); s != "" {
		if first, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("ROBUSTNESS_FIRST_SEED=%q is not a seed: give a number", s)
		}
	}
	start, lastLog := time.Now(), time.Now()
	var stats Stats
	var failing, known []string
	steps, n := 0, 0
	for seed := first; ; seed++ {
		if (limit > 0 && time.Since(start) >= limit) || (seeds > 0 && n >= seeds) {
			break
		}
		sc := Generate(seed)
		rep := runSeed(t, sc, "a")
		n, steps, stats = n+1, steps+rep.Steps, stats.Add(rep.Stats)
		if rep.Failed() {
			line := fmt.Sprintf("seed %d: %s", seed, firstLine(rep))
			if onlyKnown(rep) {
				known = append(known, line)
			} else {
				failing = append(failing, line)
			}
			t.Logf("%s\nthe schedule's last lines:\n%s", rep.Summary(), rep.Trace.Tail(40))
		}
		if seed%10 == 0 {
			sameSchedule(t, seed, "run again", rep, runSeed(t, sc, "again"))
		}
		if time.Since(lastLog) > time.Minute {
			t.Logf("%d schedules so far (seeds %d..%d), %d failing", n, first, seed, len(failing)+len(known))
			lastLog = time.Now()
		}
	}
	t.Logf("explored %d schedules (seeds %d..%d, %d steps) in %s: %s", n, first, first+uint64(n)-1, steps, time.Since(start).Round(time.Second), stats)
	for _, l := range append(failing, known...) {
		t.Logf("FAILING %s", l)
	}
	if len(known) > 0 {
		t.Logf("%d seed(s) found only the known defect %q", len(known), KnownReusedName)
	}
	if len(failing)+len(known) > 0 {
		t.Errorf("%d of %d schedules break an invariant; replay one with make robustness ROBUSTNESS_SEED=N (it prints the whole schedule)", len(failing)+len(known), n)
	}
}

func firstLine(rep *Report) string {
	if rep.Err != nil {
		return rep.Err.Error()
	}
	v := rep.Violations[0]
	return fmt.Sprintf("%s at revision %d: %s", v.Invariant, v.Revision, v.Detail)
}

func onlyKnown(rep *Report) bool {
	if rep.Err != nil {
		return false
	}
	for _, v := range rep.Violations {
		if v.Known == "" {
			return false
		}
	}
	return true
}
