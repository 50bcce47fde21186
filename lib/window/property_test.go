package window

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// propertyZones mix plain zones with one-hour, half-hour and southern
// daylight saving changes.
var propertyZones = []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "Asia/Kolkata"}

// randomSpec builds a valid specification in one of the accepted forms.
func randomSpec(r *rand.Rand) string {
	days := []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}
	day := func() string { return days[r.IntN(7)] }
	// Times cluster around the 02:00-03:00 hour, where daylight saving
	// changes happen, and include 24:00 as an end.
	clock := func(asEnd bool) string {
		if asEnd && r.IntN(10) == 0 {
			return "24:00"
		}
		if r.IntN(2) == 0 {
			return fmt.Sprintf("%02d:%02d", 1+r.IntN(3), 15*r.IntN(4))
		}
		return fmt.Sprintf("%02d:%02d", r.IntN(24), 5*r.IntN(12))
	}
	ordinal := func(most int) string {
		if r.IntN(4) == 0 {
			return "last"
		}
		n := 1 + r.IntN(most)
		return fmt.Sprintf("%d%s", n, ordinalSuffix(n))
	}
	for {
		start, end := clock(false), clock(true)
		var spec string
		switch r.IntN(10) { // half weekly, half calendar forms
		case 0:
			spec = fmt.Sprintf("%s %s-%s %s", day(), start, day(), end)
		case 1:
			spec = fmt.Sprintf("* %s-%s", start, end)
		case 2:
			spec = fmt.Sprintf("%s-%s %s-%s", day(), day(), start, end)
		case 3:
			spec = fmt.Sprintf("%s,%s %s-%s", day(), day(), start, end)
		case 4:
			spec = fmt.Sprintf("%s %s-%s", day(), start, end)
		case 5:
			spec = fmt.Sprintf("%s %s %s-%s", ordinal(5), day(), start, end)
		case 6:
			spec = fmt.Sprintf("%s after %s %s %s-%s", day(), ordinal(5), day(), start, end)
		case 7:
			spec = fmt.Sprintf("%s,%s %s-%s", ordinal(31), ordinal(31), start, end)
		case 8:
			spec = fmt.Sprintf("%s,%s %s-%s", randomDate(r), randomDate(r), start, end)
		default:
			spec = fmt.Sprintf("%s %s-%s %s", randomDate(r), start, randomDate(r), end)
		}
		if Validate(spec) == nil { // start == end (or a dated end before its start) is the one invalid outcome
			return spec
		}
	}
}

// randomDate is a date near the instants randomInstant picks, often on or
// near a daylight saving change.
func randomDate(r *rand.Rand) string {
	return randomInstant(r).Add(time.Duration(r.IntN(5)-2) * 24 * time.Hour).Format(time.DateOnly)
}

func randomSchedule(t *testing.T, r *rand.Rand) (*Schedule, string) {
	t.Helper()
	var allow, deny []string
	for range r.IntN(3) {
		allow = append(allow, randomSpec(r))
	}
	for range r.IntN(3) {
		deny = append(deny, randomSpec(r))
	}
	loc := mustZone(t, propertyZones[r.IntN(len(propertyZones))])
	s, err := New(allow, deny, loc)
	if err != nil {
		t.Fatalf("New(%q, %q): %v", allow, deny, err)
	}
	return s, fmt.Sprintf("allow %q deny %q in %s", allow, deny, loc)
}

// randomInstant picks an instant in 2026, often near a daylight saving change.
func randomInstant(r *rand.Rand) time.Time {
	near := []time.Time{
		time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC),   // Europe
		time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC),  // Europe
		time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC),    // America/New_York
		time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC),   // America/New_York
		time.Date(2026, 4, 4, 15, 0, 0, 0, time.UTC),   // Australia/Lord_Howe
		time.Date(2026, 10, 3, 15, 30, 0, 0, time.UTC), // Australia/Lord_Howe
		time.Date(2026, 4, 5, 3, 0, 0, 0, time.UTC),    // America/Santiago
		time.Date(2026, 9, 6, 4, 0, 0, 0, time.UTC),    // America/Santiago
	}
	if r.IntN(2) == 0 {
		base := near[r.IntN(len(near))]
		return base.Add(time.Duration(r.Int64N(int64(10*24*time.Hour))) - 8*24*time.Hour)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return start.Add(time.Duration(r.Int64N(int64(365 * 24 * time.Hour))))
}

// TestPropertyNextChanges: for random schedules and instants, NextOpen is an
// instant at which the schedule is open and one second before which it is
// closed, NextClose the reverse, and the state holds from the evaluated
// instant up to the first of them.
func TestPropertyNextChanges(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 2026))
	t.Logf("seed %d", seed)
	for i := range 3000 {
		s, desc := randomSchedule(t, r)
		at := randomInstant(r)
		d := s.At(at)
		where := fmt.Sprintf("case %d (seed %d): %s at %s", i, seed, desc, at.In(s.loc).Format(time.RFC3339Nano))
		if !d.NextOpen.IsZero() {
			if !d.NextOpen.After(at) {
				t.Fatalf("%s: NextOpen %s is not after the instant", where, d.NextOpen)
			}
			if !s.At(d.NextOpen).Open || s.At(d.NextOpen.Add(-time.Second)).Open {
				t.Fatalf("%s: not closed→open at NextOpen %s", where, d.NextOpen.Format(time.RFC3339))
			}
		}
		if !d.NextClose.IsZero() {
			if !d.NextClose.After(at) {
				t.Fatalf("%s: NextClose %s is not after the instant", where, d.NextClose)
			}
			if s.At(d.NextClose).Open || !s.At(d.NextClose.Add(-time.Second)).Open {
				t.Fatalf("%s: not open→closed at NextClose %s", where, d.NextClose.Format(time.RFC3339))
			}
		}
		// The state holds until the first change: probe a few instants.
		until := at.Add(s.Horizon())
		if next := d.NextOpen; d.Open == false && !next.IsZero() {
			until = next
		}
		if next := d.NextClose; d.Open && !next.IsZero() {
			until = next
		}
		for range 5 {
			probe := at.Add(time.Duration(r.Int64N(int64(until.Sub(at)))))
			if got := s.decide(probe).Open; got != d.Open {
				t.Fatalf("%s: open=%v at %s, before the announced change at %s", where, got, probe.In(s.loc).Format(time.RFC3339), until.Format(time.RFC3339))
			}
		}
	}
}

// TestAgainstBruteForce compares At's look-ahead with a minute-by-minute walk
// over the whole weekly horizon (the zones used change offset on whole
// minutes). For calendar windows the walk covers 40 days of the longer
// horizon: a change it finds must be the announced one, and none may be
// announced within it that it did not find.
func TestAgainstBruteForce(t *testing.T) {
	if testing.Short() {
		t.Skip("minute-by-minute walk")
	}
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)
	for i := range 40 {
		s, desc := randomSchedule(t, r)
		at := randomInstant(r)
		d := s.At(at)
		walkEnd := at.Add(min(s.Horizon(), 40*24*time.Hour))
		var wantOpen, wantClose time.Time
		state := d.Open
		for m := at.Truncate(time.Minute).Add(time.Minute); !m.After(walkEnd); m = m.Add(time.Minute) {
			o := s.decide(m).Open
			if o == state {
				continue
			}
			state = o
			if o && wantOpen.IsZero() {
				wantOpen = m
			} else if !o && wantClose.IsZero() {
				wantClose = m
			}
		}
		agrees := func(got, want time.Time) bool {
			if want.IsZero() {
				return got.IsZero() || got.After(walkEnd)
			}
			return got.Equal(want)
		}
		if !agrees(d.NextOpen, wantOpen) || !agrees(d.NextClose, wantClose) {
			t.Fatalf("case %d (seed %d): %s at %s: next open %s close %s, the minute walk says open %s close %s",
				i, seed, desc, at.In(s.loc).Format(time.RFC3339), d.NextOpen, d.NextClose, wantOpen, wantClose)
		}
	}
}

// FuzzParse: no input makes Parse panic; what it accepts is well formed and
// evaluable; what it rejects comes with a message quoting the input and a
// valid example. The seeds run in every plain `go test`.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"Fri 18:00-Mon 08:00", "* 23:00-06:00", "Tue 22:00-23:00", "Mon-Fri 22:00-23:00",
		"Mon,Wed,Fri 10:00-11:30", "Sat-Mon 01:00-03:00", "Fri 23:00-01:00", "Sat 00:00-24:00",
		"Tue 22:00-22:00", "Fri 18:00-Fri 18:00", "", "*", "Mon - Fri 9:00 - 17:00", "sunday 02:30-03:30",
		"Fri 18:00-Mon", "Fri-18:00", "0 22 * * 2", "Mon,,Fri 1:00-2:00", "*,Mon 01:00-02:00", "Tue 24:00-01:00",
		"Fri 18:00 - Mon 08:00 - Tue 09:00", "\x00 12:00-13:00", "Mo\u0308n 01:00-02:00",
		"2nd Tue 22:00-02:00", "last Fri 20:00-24:00", "Sat after 2nd Tue 02:00-06:00", "1st 02:00-04:00",
		"1st,15th,last 02:00-04:00", "5th Tue 01:00-02:00", "2026-12-24 00:00-2026-12-27 00:00",
		"2026-12-24,2026-12-31 00:00-24:00", "2028-02-29 22:00-02:00", "2027-02-29 00:00-24:00",
		"2026-12-27 00:00-2026-12-24 00:00", "2nd Tue 22:00-Wed 02:00", "6th Tue 01:00-02:00", "32nd 01:00-02:00",
		"2th Tue 01:00-02:00", "second Tue 01:00-02:00", "Sat after last Sun 01:00-02:00", "Mon Tue 01:00-02:00",
		"1st,,2nd 01:00-02:00", "9999-12-31 23:00-9999-12-31 24:00", "0000-01-01 00:00-24:00", "last 24:00-01:00",
		"99999999999999999999th 01:00-02:00", "Sat after 2nd 01:00-02:00",
	} {
		f.Add(seed)
	}
	loc := time.FixedZone("UTC+1", 3600)
	at := time.Date(2026, 3, 29, 2, 30, 0, 0, loc)
	f.Fuzz(func(t *testing.T, spec string) {
		w, err := Parse(spec)
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) error %v is not a *SpecError", spec, err)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("%q: ", spec)) {
				t.Fatalf("message %q does not start with the quoted spec", err)
			}
			if Validate(se.Example) != nil {
				t.Fatalf("example %q for %q is invalid", se.Example, spec)
			}
			return
		}
		if forms := len(w.intervals); forms == 0 && w.calendar == nil && w.dated == nil ||
			forms > 0 && (w.calendar != nil || w.dated != nil) || w.calendar != nil && w.dated != nil {
			t.Fatalf("Parse(%q) = %+v: want exactly one of the weekly, calendar or dated forms", spec, w)
		}
		if c := w.calendar; c != nil && (len(c.rules) == 0 || c.start < 0 || c.start >= minutesPerDay || c.length < 1 || c.length > minutesPerDay) {
			t.Fatalf("Parse(%q) produced the calendar span %+v", spec, *c)
		}
		if d := w.dated; d != nil && d.to <= d.from {
			t.Fatalf("Parse(%q) produced the dated span %+v", spec, *d)
		}
		for _, iv := range w.intervals {
			if iv.start < 0 || iv.start >= minutesPerWeek || iv.length < 1 || iv.length > minutesPerWeek {
				t.Fatalf("Parse(%q) produced %+v", spec, iv)
			}
		}
		s, err := New([]string{spec}, []string{spec}, loc)
		if err != nil {
			t.Fatalf("New rejects what Parse accepts: %v", err)
		}
		if d := s.At(at); d.Open {
			t.Fatalf("a window that is both allow and deny is open: %+v", d)
		}
	})
}
