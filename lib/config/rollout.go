package config

import (
	"fmt"
	"sort"
	"time"
)

// budget checks a budget field: a count of at least min (0 allowed when
// zeroOK says what 0 means), or a percentage from 1 to 100.
func (v *validator) budget(field string, b Budget, min int, zeroMeans string) {
	switch {
	case b.Percent > 0:
		// ParseBudget bounds it already.
	case b.N == 0 && zeroMeans != "":
	case b.N < min:
		if zeroMeans != "" {
			v.bad(field, "%d must not be negative (0: %s), or a percentage such as \"10%%\"", b.N, zeroMeans)
			return
		}
		v.bad(field, "%d must be at least %d, or a percentage such as \"10%%\"", b.N, min)
	}
}

// rollout checks the rollout section (docs/rollout.md).
func (v *validator) rollout() {
	r := v.cfg.Rollout
	if r.Wave < 0 || r.Wave > 99 {
		v.bad("rollout.wave", "%d is not a wave from 0 (canaries) to 99", r.Wave)
	}
	v.budget("rollout.max_failures", r.MaxFailures, 1, "no failure budget: a bad update may take the whole fleet")
	if r.FailureScope != ScopeFleet && r.FailureScope != ScopeGroup {
		v.bad("rollout.failure_scope", "%q is neither fleet (the default: a failure halts every group) nor group", r.FailureScope)
	}
	for _, f := range []struct {
		name string
		n    int
		min  int
	}{
		{"rollout.failure_window_sec", r.FailureWindowSec, 60}, {"rollout.post_reboot_timeout_sec", r.PostRebootTimeoutSec, 60},
		{"rollout.min_interval_sec", r.MinIntervalSec, 0}, {"rollout.wave_bake_sec", r.WaveBakeSec, 0},
		{"rollout.wave_timeout_sec", r.WaveTimeoutSec, 60},
	} {
		switch {
		case f.n < f.min && f.min > 0:
			v.bad(f.name, "%d is too short: at least %d seconds", f.n, f.min)
		case f.n < 0:
			v.bad(f.name, "%d must not be negative (0: none)", f.n)
		case f.n > 0 && f.n < 2:
			// etcd's leases time these: its shortest lease is 2 s.
			v.bad(f.name, "%d is below etcd's shortest lease of 2 s; use 0 (none) or at least 2", f.n)
		}
		v.atMostAYear(f.name, f.n)
	}
	if r.MaxStartsPerHour < 0 {
		v.bad("rollout.max_starts_per_hour", "%d must not be negative (0: no fleet-wide rate)", r.MaxStartsPerHour)
	}
}

// fleetLock checks the FleetLock server's per-group settings.
func (v *validator) fleetLock(check WindowValidator) {
	fl := v.cfg.FleetLock
	if fl.Windows != nil {
		v.windowSet("fleetlock.windows", *fl.Windows, check)
	}
	names := make([]string, 0, len(fl.Groups))
	for g := range fl.Groups {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		s := fl.Groups[g]
		f := "fleetlock.groups." + g
		if g != "" && !validName(g, 63, false) {
			v.bad(f, "%q is not a lock group: letters, digits, '.', '_' or '-' (at most 63)", g)
		}
		if s.MaxHolders != nil {
			v.budget(f+".max_holders", *s.MaxHolders, 1, "")
		}
		if s.Wave < 0 || s.Wave > 99 {
			v.bad(f+".wave", "%d is not a wave from 0 (canaries) to 99", s.Wave)
		}
		if s.Windows != nil {
			v.windowSet(f+".windows", *s.Windows, check)
		}
	}
}

// windowSet checks one windows: block (field is its path).
func (v *validator) windowSet(field string, w Windows, check WindowValidator) {
	if w.Timezone != "" {
		if _, err := time.LoadLocation(w.Timezone); err != nil {
			v.bad(field+".timezone", "%q is not a known IANA time zone (e.g. Europe/Berlin, UTC, Local)", w.Timezone)
		}
	}
	if check == nil {
		return
	}
	for i, s := range w.Deny {
		if err := check(s); err != nil {
			v.bad(fmt.Sprintf("%s.deny[%d]", field, i), "%v", err)
		}
	}
	for i, s := range w.Allow {
		if err := check(s); err != nil {
			v.bad(fmt.Sprintf("%s.allow[%d]", field, i), "%v", err)
		}
	}
}
