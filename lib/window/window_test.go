package window

import (
	"errors"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests must not depend on the host's zoneinfo

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return loc
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("parse %s: %v", s, err)
	}
	return at
}

// The PRD's example configuration.
var (
	prdDeny  = []string{"Fri 18:00-Mon 08:00", "* 23:00-06:00"}
	prdAllow = []string{"Tue 22:00-23:00"}
)

func TestAt(t *testing.T) {
	tests := []struct {
		name        string
		zone        string
		allow, deny []string
		at          string // RFC3339
		open        bool
		reason      string
		window      string
		nextOpen    string // RFC3339 in the zone, "" for none
		nextClose   string
	}{
		{
			name: "no windows is always open", zone: "Europe/Berlin",
			at: "2026-12-01T22:30:00+01:00", open: true, reason: "no windows configured",
		},
		{
			name: "inside the PRD allow window", zone: "Europe/Berlin", allow: prdAllow, deny: prdDeny,
			at: "2026-12-01T22:30:00+01:00", open: true, reason: `inside allow window "Tue 22:00-23:00"`, window: "Tue 22:00-23:00",
			nextClose: "2026-12-01T23:00:00+01:00", nextOpen: "2026-12-08T22:00:00+01:00",
		},
		{
			name: "allow window given in UTC is read in the zone", zone: "Europe/Berlin", allow: prdAllow, deny: prdDeny,
			at: "2026-12-01T21:59:59Z", open: true, reason: `inside allow window "Tue 22:00-23:00"`, window: "Tue 22:00-23:00",
			nextClose: "2026-12-01T23:00:00+01:00", nextOpen: "2026-12-08T22:00:00+01:00",
		},
		{
			name: "end of an allow window is outside", zone: "Europe/Berlin", allow: prdAllow, deny: prdDeny,
			at: "2026-12-01T23:00:00+01:00", reason: `inside deny window "* 23:00-06:00"`, window: "* 23:00-06:00",
			nextOpen: "2026-12-08T22:00:00+01:00", nextClose: "2026-12-08T23:00:00+01:00",
		},
		{
			name: "a minute before the allow window", zone: "Europe/Berlin", allow: prdAllow, deny: prdDeny,
			at: "2026-12-01T21:59:00+01:00", reason: "outside every allow window",
			nextOpen: "2026-12-01T22:00:00+01:00", nextClose: "2026-12-01T23:00:00+01:00",
		},
		{
			name: "Sunday 02:59 in Europe/Berlin is in the weekend blackout", zone: "Europe/Berlin", allow: prdAllow, deny: prdDeny,
			at: "2026-11-29T02:59:00+01:00", reason: `inside deny window "Fri 18:00-Mon 08:00"`, window: "Fri 18:00-Mon 08:00",
			nextOpen: "2026-12-01T22:00:00+01:00", nextClose: "2026-12-01T23:00:00+01:00",
		},
		{
			name: "only deny windows: outside them is open", zone: "Europe/Berlin", deny: prdDeny,
			at: "2026-11-30T12:00:00+01:00", open: true, reason: "outside every deny window",
			nextClose: "2026-11-30T23:00:00+01:00", nextOpen: "2026-12-01T06:00:00+01:00",
		},
		{
			name: "deny wins over allow", zone: "UTC", allow: []string{"* 00:00-24:00"}, deny: []string{"Wed 12:00-13:00"},
			at: "2026-12-02T12:30:00Z", reason: `inside deny window "Wed 12:00-13:00"`, window: "Wed 12:00-13:00",
			nextOpen: "2026-12-02T13:00:00Z", nextClose: "2026-12-09T12:00:00Z",
		},
		{
			name: "the first matching deny window is named", zone: "UTC", deny: []string{"Wed 12:00-14:00", "Wed 11:00-13:00"},
			at: "2026-12-02T12:30:00Z", reason: `inside deny window "Wed 12:00-14:00"`, window: "Wed 12:00-14:00",
			nextOpen: "2026-12-02T14:00:00Z", nextClose: "2026-12-09T11:00:00Z",
		},
		{
			name: "allow everything, no deny: never closes", zone: "UTC", allow: []string{"* 00:00-24:00"},
			at: "2026-12-02T12:30:00Z", open: true, reason: `inside allow window "* 00:00-24:00"`, window: "* 00:00-24:00",
		},
		{
			name: "deny everything: never opens", zone: "UTC", allow: []string{"Tue 22:00-23:00"}, deny: []string{"Mon 00:00-Sun 23:59", "Sun 23:00-Mon 00:00"},
			at: "2026-12-01T22:30:00Z", reason: `inside deny window "Mon 00:00-Sun 23:59"`, window: "Mon 00:00-Sun 23:59",
		},
		{
			name: "span wrapping the week, Monday morning", zone: "UTC", deny: []string{"Sun 22:00-Mon 02:00"},
			at: "2026-11-30T01:00:00Z", reason: `inside deny window "Sun 22:00-Mon 02:00"`, window: "Sun 22:00-Mon 02:00",
			nextOpen: "2026-11-30T02:00:00Z", nextClose: "2026-12-06T22:00:00Z",
		},
		{
			name: "day range wrapping the week", zone: "UTC", allow: []string{"Sat-Mon 01:00-03:00"},
			at: "2026-11-30T02:00:00Z", open: true, reason: `inside allow window "Sat-Mon 01:00-03:00"`, window: "Sat-Mon 01:00-03:00",
			nextClose: "2026-11-30T03:00:00Z", nextOpen: "2026-12-05T01:00:00Z",
		},
		{
			name: "daily span wrapping midnight belongs to its start day", zone: "UTC", allow: []string{"Fri 23:00-01:00"},
			at: "2026-12-05T00:30:00Z", open: true, reason: `inside allow window "Fri 23:00-01:00"`, window: "Fri 23:00-01:00",
			nextClose: "2026-12-05T01:00:00Z", nextOpen: "2026-12-11T23:00:00Z",
		},
		{
			name: "daily span wrapping midnight: not on the day before", zone: "UTC", allow: []string{"Fri 23:00-01:00"},
			at: "2026-12-04T00:30:00Z", reason: "outside every allow window",
			nextOpen: "2026-12-04T23:00:00Z", nextClose: "2026-12-05T01:00:00Z",
		},
		// Spring forward in Europe/Berlin: 2026-03-29 02:00 CET becomes 03:00 CEST.
		{
			name: "spring: window starting in the gap opens when the clock jumps", zone: "Europe/Berlin", allow: []string{"Sun 02:30-03:30"},
			at: "2026-03-29T01:30:00+01:00", reason: "outside every allow window",
			nextOpen: "2026-03-29T03:00:00+02:00", nextClose: "2026-03-29T03:30:00+02:00",
		},
		{
			name: "spring: inside the shortened window", zone: "Europe/Berlin", allow: []string{"Sun 02:30-03:30"},
			at: "2026-03-29T01:15:00Z", open: true, reason: `inside allow window "Sun 02:30-03:30"`, window: "Sun 02:30-03:30",
			nextClose: "2026-03-29T03:30:00+02:00", nextOpen: "2026-04-05T02:30:00+02:00",
		},
		{
			name: "spring: window entirely inside the gap is skipped that day", zone: "Europe/Berlin", allow: []string{"Sun 02:00-03:00"},
			at: "2026-03-29T01:59:00+01:00", reason: "outside every allow window",
			nextOpen: "2026-04-05T02:00:00+02:00", nextClose: "2026-04-05T03:00:00+02:00",
		},
		{
			name: "spring: Sunday 02:59 wall time does not exist; 03:00 CEST is past the window", zone: "Europe/Berlin", allow: []string{"Sun 02:00-03:00"},
			at: "2026-03-29T01:00:00Z", reason: "outside every allow window",
			nextOpen: "2026-04-05T02:00:00+02:00", nextClose: "2026-04-05T03:00:00+02:00",
		},
		{
			name: "spring: deny window starting in the gap closes at the jump", zone: "Europe/Berlin", deny: []string{"Sun 02:30-04:00"},
			at: "2026-03-29T01:00:00+01:00", open: true, reason: "outside every deny window",
			nextClose: "2026-03-29T03:00:00+02:00", nextOpen: "2026-03-29T04:00:00+02:00",
		},
		// Fall back in Europe/Berlin: 2026-10-25 03:00 CEST becomes 02:00 CET.
		{
			name: "autumn: window over the repeated hour lasts two real hours", zone: "Europe/Berlin", allow: []string{"Sun 02:00-03:00"},
			at: "2026-10-25T01:30:00+02:00", reason: "outside every allow window",
			nextOpen: "2026-10-25T02:00:00+02:00", nextClose: "2026-10-25T03:00:00+01:00",
		},
		{
			name: "autumn: second pass of the repeated hour is inside", zone: "Europe/Berlin", allow: []string{"Sun 02:00-03:00"},
			at: "2026-10-25T02:30:00+01:00", open: true, reason: `inside allow window "Sun 02:00-03:00"`, window: "Sun 02:00-03:00",
			nextClose: "2026-10-25T03:00:00+01:00", nextOpen: "2026-11-01T02:00:00+01:00",
		},
		{
			name: "autumn: window across the jump back closes and reopens", zone: "Europe/Berlin", allow: []string{"Sun 02:30-03:30"},
			at: "2026-10-25T02:45:00+02:00", open: true, reason: `inside allow window "Sun 02:30-03:30"`, window: "Sun 02:30-03:30",
			nextClose: "2026-10-25T02:00:00+01:00", nextOpen: "2026-10-25T02:30:00+01:00",
		},
		{
			name: "autumn: first 02:10 is before the window, second 02:10 too", zone: "Europe/Berlin", allow: []string{"Sun 02:30-03:30"},
			at: "2026-10-25T02:10:00+01:00", reason: "outside every allow window",
			nextOpen: "2026-10-25T02:30:00+01:00", nextClose: "2026-10-25T03:30:00+01:00",
		},
		{
			name: "autumn: deny window over the repeated hour", zone: "Europe/Berlin", deny: []string{"Sun 02:00-03:00"},
			at: "2026-10-25T01:59:59+02:00", open: true, reason: "outside every deny window",
			nextClose: "2026-10-25T02:00:00+02:00", nextOpen: "2026-10-25T03:00:00+01:00",
		},
		{
			name: "half-hour daylight saving (Australia/Lord_Howe)", zone: "Australia/Lord_Howe", allow: []string{"Sun 01:45-02:15"},
			// 2026-10-04 02:00 +10:30 becomes 02:30 +11:00.
			at: "2026-10-04T01:50:00+10:30", open: true, reason: `inside allow window "Sun 01:45-02:15"`, window: "Sun 01:45-02:15",
			nextClose: "2026-10-04T02:30:00+11:00", nextOpen: "2026-10-11T01:45:00+11:00",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc := mustZone(t, tt.zone)
			s, err := New(tt.allow, tt.deny, loc)
			if err != nil {
				t.Fatal(err)
			}
			d := s.At(mustTime(t, tt.at))
			if d.Open != tt.open || d.Reason != tt.reason || d.Window != tt.window {
				t.Errorf("At(%s) = open %v, reason %q, window %q; want %v, %q, %q", tt.at, d.Open, d.Reason, d.Window, tt.open, tt.reason, tt.window)
			}
			checkInstant(t, "NextOpen", d.NextOpen, tt.nextOpen, loc)
			checkInstant(t, "NextClose", d.NextClose, tt.nextClose, loc)
		})
	}
}

func checkInstant(t *testing.T, what string, got time.Time, want string, loc *time.Location) {
	t.Helper()
	if want == "" {
		if !got.IsZero() {
			t.Errorf("%s = %s, want none", what, got.Format(time.RFC3339))
		}
		return
	}
	if got.Format(time.RFC3339) != want {
		t.Errorf("%s = %s, want %s", what, got.Format(time.RFC3339), want)
	}
	if got.Location() != loc {
		t.Errorf("%s is in %v, want the schedule's %v", what, got.Location(), loc)
	}
}

func TestNewRejectsBadSpecs(t *testing.T) {
	tests := []struct {
		name        string
		allow, deny []string
		want        string
	}{
		{"bad allow", []string{"Tue 22:00-23:00", "Tue 22:00"}, nil, `window: allow[1]: "Tue 22:00": time span "22:00" has no "-"`},
		{"bad deny", nil, []string{"Fry 18:00-Mon 08:00"}, `window: deny[0]: "Fry 18:00-Mon 08:00": unknown day "Fry"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.allow, tt.deny, time.UTC)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("New = %v, want prefix %q", err, tt.want)
			}
			if exitcode.CodeOf(err) != exitcode.Config {
				t.Errorf("code %v, want config", exitcode.CodeOf(err))
			}
			var se *SpecError
			if !errors.As(err, &se) {
				t.Errorf("%v does not wrap a *SpecError", err)
			}
		})
	}
	t.Run("nil location is a bug", func(t *testing.T) {
		_, err := New(nil, nil, nil)
		if exitcode.CodeOf(err) != exitcode.Internal {
			t.Fatalf("New(nil loc) = %v, want an internal error", err)
		}
	})
}

func TestLocation(t *testing.T) {
	loc := mustZone(t, "Europe/Berlin")
	s, err := New(nil, nil, loc)
	if err != nil {
		t.Fatal(err)
	}
	if s.Location() != loc {
		t.Errorf("Location() = %v", s.Location())
	}
}

func TestLoadLocation(t *testing.T) {
	tests := []struct {
		name, zone, want, err string
	}{
		{"empty is the host zone", "", "Local", ""},
		{"Local", "Local", "Local", ""},
		{"UTC", "UTC", "UTC", ""},
		{"IANA name", "Europe/Berlin", "Europe/Berlin", ""},
		{"unknown", "Mars/Olympus_Mons", "", `unknown time zone "Mars/Olympus_Mons": use an IANA name such as "Europe/Berlin"`},
		{"wrong case of Local", "local", "", `unknown time zone "local"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc, err := LoadLocation(tt.zone)
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("LoadLocation(%q) = %v, %v; want error %q", tt.zone, loc, err, tt.err)
				}
				return
			}
			if err != nil || loc.String() != tt.want {
				t.Fatalf("LoadLocation(%q) = %v, %v; want %s", tt.zone, loc, err, tt.want)
			}
		})
	}
}

// BenchmarkAt measures one decision with its look-ahead for the PRD schedule.
func BenchmarkAt(b *testing.B) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(prdAllow, prdDeny, loc)
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 10, 20, 12, 0, 0, 0, loc)
	for b.Loop() {
		s.At(at)
	}
}

// BenchmarkAtCalendar measures a decision whose look-ahead searches the whole
// calendar horizon: an allow window in the past never opens again.
func BenchmarkAtCalendar(b *testing.B) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	s, err := New([]string{"2nd Tue 22:00-02:00", "2025-12-24 00:00-24:00"}, append([]string{"* 00:00-24:00"}, prdDeny...), loc)
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 10, 20, 12, 0, 0, 0, loc)
	for b.Loop() {
		s.At(at)
	}
}
