package window

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func date(t *testing.T, s string) time.Time {
	t.Helper()
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestParseCalendarPicks: each calendar form picks exactly the dates it
// names, across month and year ends and on leap days.
func TestParseCalendarPicks(t *testing.T) {
	tests := []struct {
		name       string
		spec       string
		start, len int
		picks      []string
		skips      []string
	}{
		{"Patch Tuesday", "2nd Tue 22:00-02:00", 22 * 60, 240,
			[]string{"2026-12-08", "2027-01-12", "2026-03-10", "2026-02-10"},
			[]string{"2026-12-01", "2026-12-15", "2026-12-09", "2027-01-05"}},
		{"last Friday", "last Fri 20:00-24:00", 20 * 60, 240,
			[]string{"2026-12-25", "2027-01-29", "2026-02-27", "2028-03-31"},
			[]string{"2026-12-18", "2027-01-22", "2028-03-24"}},
		{"full names, any case", "LAST friday 20:00-24:00", 20 * 60, 240,
			[]string{"2026-12-25"}, []string{"2026-12-18"}},
		{"the 5th Tuesday exists in some months only", "5th Tue 01:00-02:00", 60, 60,
			[]string{"2026-12-29", "2027-03-30", "2028-02-29"},
			[]string{"2026-12-22", "2027-02-23", "2027-01-26"}},
		{"the Saturday after Patch Tuesday", "Sat after 2nd Tue 02:00-06:00", 2 * 60, 240,
			[]string{"2026-12-12", "2027-01-16", "2026-03-14"},
			[]string{"2026-12-05", "2026-12-19", "2026-12-08", "2026-03-07"}},
		{"a day after a last weekday crosses into the next month", "Mon after last Fri 01:00-03:00", 60, 120,
			[]string{"2026-12-28", "2027-02-01", "2028-04-03"},
			[]string{"2027-01-25", "2027-01-04", "2028-03-27"}},
		{"the same weekday after is a week later", "Tue after last Tue 01:00-03:00", 60, 120,
			[]string{"2027-01-05", "2026-12-01"},
			[]string{"2026-12-29", "2026-11-24", "2026-12-08"}},
		{"first day of the month", "1st 02:00-04:00", 2 * 60, 120,
			[]string{"2026-12-01", "2027-01-01", "2028-03-01"},
			[]string{"2026-12-02", "2026-12-31", "2028-02-29"}},
		{"days of the month in a list", "1st,15th 02:00-04:00", 2 * 60, 120,
			[]string{"2026-12-01", "2026-12-15"}, []string{"2026-12-14", "2026-12-16"}},
		{"the 29th skips February outside leap years", "29th 02:00-04:00", 2 * 60, 120,
			[]string{"2027-01-29", "2027-03-29", "2028-02-29"}, []string{"2027-02-28", "2028-02-28"}},
		{"last day of the month", "last 22:00-02:00", 22 * 60, 240,
			[]string{"2026-12-31", "2027-02-28", "2028-02-29", "2026-04-30"},
			[]string{"2026-12-30", "2028-02-28", "2027-03-01"}},
		{"the 11th, 12th and 13th", "11th,12th,13th,21st,22nd,23rd 01:00-02:00", 60, 60,
			[]string{"2026-12-11", "2026-12-12", "2026-12-13", "2026-12-21", "2026-12-22", "2026-12-23"},
			[]string{"2026-12-10", "2026-12-14", "2026-12-20", "2026-12-24"}},
		{"a list of holidays", "2026-12-24, 2026-12-25,2026-12-31 00:00-24:00", 0, minutesPerDay,
			[]string{"2026-12-24", "2026-12-25", "2026-12-31"},
			[]string{"2025-12-24", "2026-12-26", "2027-12-24"}},
		{"weekdays mixed with monthly days", "Sat-Sun,1st 02:00-04:00", 2 * 60, 120,
			[]string{"2026-12-05", "2026-12-06", "2026-12-01"}, []string{"2026-12-02", "2026-12-04"}},
		{"weekday ordinals in a list", "2nd Tue, 4th Tue 22:00-23:00", 22 * 60, 60,
			[]string{"2026-12-08", "2026-12-22"}, []string{"2026-12-01", "2026-12-15", "2026-12-29"}},
		{"blanks around the dash", "2nd Tue 22:00 - 02:00", 22 * 60, 240,
			[]string{"2026-12-08"}, []string{"2026-12-15"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Parse(tt.spec)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.spec, err)
			}
			if w.calendar == nil || w.intervals != nil || w.dated != nil {
				t.Fatalf("Parse(%q) = %+v, want a calendar span", tt.spec, w)
			}
			if w.calendar.start != tt.start || w.calendar.length != tt.len {
				t.Errorf("span starts at minute %d for %d minutes, want %d for %d", w.calendar.start, w.calendar.length, tt.start, tt.len)
			}
			for _, d := range tt.picks {
				if !w.calendar.picks(date(t, d)) {
					t.Errorf("%q does not pick %s", tt.spec, d)
				}
			}
			for _, d := range tt.skips {
				if w.calendar.picks(date(t, d)) {
					t.Errorf("%q picks %s", tt.spec, d)
				}
			}
		})
	}
}

func TestParseDated(t *testing.T) {
	tests := []struct {
		name, spec string
		from, to   string
	}{
		{"Christmas blackout", "2026-12-24 00:00-2026-12-27 00:00", "2026-12-24T00:00", "2026-12-27T00:00"},
		{"blanks around the dash", "2026-12-24 00:00 - 2026-12-27 00:00", "2026-12-24T00:00", "2026-12-27T00:00"},
		{"over the year end to 24:00", "2026-12-31 18:00-2027-01-01 24:00", "2026-12-31T18:00", "2027-01-02T00:00"},
		{"on a leap day", "2028-02-28 22:00-2028-02-29 06:00", "2028-02-28T22:00", "2028-02-29T06:00"},
		{"within one day", "2026-12-24 10:00-2026-12-24 11:00", "2026-12-24T10:00", "2026-12-24T11:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Parse(tt.spec)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.spec, err)
			}
			if w.dated == nil || w.calendar != nil || w.intervals != nil {
				t.Fatalf("Parse(%q) = %+v, want a dated span", tt.spec, w)
			}
			minutes := func(s string) int64 {
				at, err := time.Parse("2006-01-02T15:04", s)
				if err != nil {
					t.Fatal(err)
				}
				return at.Unix() / 60
			}
			if w.dated.from != minutes(tt.from) || w.dated.to != minutes(tt.to) {
				t.Errorf("span %+v, want %s to %s", *w.dated, tt.from, tt.to)
			}
		})
	}
}

func TestParseCalendarInvalid(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		problem string // a substring of the problem
		example string
	}{
		{"word ordinal", "second Tue 22:00-23:00", `unknown days "second Tue"`, "2nd Tue 22:00-02:00"},
		{"wrong suffix", "2th Tue 22:00-23:00", `"2th" is not an ordinal: write 2nd`, "2nd Tue 22:00-02:00"},
		{"wrong suffix of a day of the month", "11st 02:00-04:00", `"11st" is not an ordinal: write 11th`, "1st 02:00-04:00"},
		{"leading zero", "01st 02:00-04:00", `"01st" is not an ordinal such as`, "1st 02:00-04:00"},
		{"no suffix", "1 02:00-04:00", `"1" is not an ordinal: write 1st`, "1st 02:00-04:00"},
		{"6th weekday", "6th Tue 22:00-23:00", "at most five of each weekday", "2nd Tue 22:00-02:00"},
		{"32nd day", "32nd 02:00-04:00", "at most 31 days", "1st 02:00-04:00"},
		{"0th day", "0th 02:00-04:00", `"0th" is out of range`, "1st 02:00-04:00"},
		{"unknown weekday after an ordinal", "2nd Tues 22:00-23:00", `unknown day "Tues"`, "2nd Tue 22:00-02:00"},
		{"ordinal of a range", "2nd Mon-Fri 22:00-23:00", `unknown day "Mon-Fri"`, "2nd Tue 22:00-02:00"},
		{"before is not a form", "Sat before 2nd Tue 02:00-06:00", `unknown days "Sat before 2nd Tue"`, "2nd Tue 22:00-02:00"},
		{"a month and a day is unknown days, not a start time \"30 01:00\"", "Feb 30 01:00-02:00", `unknown days "Feb 30"`, "2nd Tue 22:00-02:00"},
		{"after an unknown day", "Sa after 2nd Tue 02:00-06:00", `unknown day "Sa"`, "Sat after 2nd Tue 02:00-06:00"},
		{"after a bad ordinal", "Sat after 2th Tue 02:00-06:00", `write 2nd`, "Sat after 2nd Tue 02:00-06:00"},
		{"two weekdays without a comma", "Mon Tue 10:00-11:00", `unknown days "Mon Tue"`, "2nd Tue 22:00-02:00"},
		{"impossible date", "2027-02-29 00:00-24:00", `date "2027-02-29" is not a calendar date`, "2026-12-24,2026-12-31 00:00-24:00"},
		{"short date", "2026-12-4 00:00-24:00", `date "2026-12-4" is not a calendar date`, "2026-12-24,2026-12-31 00:00-24:00"},
		{"date range with a dash", "2026-12-24-2026-12-27 00:00-24:00", `is not a calendar date`, "2026-12-24,2026-12-31 00:00-24:00"},
		{"dated span ending before it starts", "2026-12-27 00:00-2026-12-24 00:00", "before or when it starts", "2026-12-24 00:00-2026-12-27 00:00"},
		{"dated span of zero length", "2026-12-24 00:00-2026-12-24 00:00", "before or when it starts", "2026-12-24 00:00-2026-12-27 00:00"},
		{"dated span to a bad date", "2026-12-24 00:00-2026-13-01 00:00", `end date "2026-13-01"`, "2026-12-24 00:00-2026-12-27 00:00"},
		{"dated span to a bad time", "2026-12-24 00:00-2026-12-27 25:00", `end time "25:00" is out of range`, "2026-12-24 00:00-2026-12-27 00:00"},
		{"monthly span to another day", "2nd Tue 22:00-Wed 02:00", "only a span that starts on a date", "2nd Tue 22:00-02:00"},
		{"dated list spanning days", "2026-12-24,2026-12-31 22:00-2027-01-01 02:00", "only a span that starts on a date", "2026-12-24,2026-12-31 00:00-24:00"},
		{"monthly start equals end", "2nd Tue 22:00-22:00", "could mean empty or a full day", "2nd Tue 00:00-24:00"},
		{"monthly without a dash", "2nd Tue 22:00", `has no "-"`, "2nd Tue 22:00-02:00"},
		{"monthly bad time", "last Fri 8pm-10pm", `"8pm" is not HH:MM`, "2nd Tue 22:00-02:00"},
		{"date without a span", "2026-12-24", "missing the time span", "Tue 22:00-23:00"},
		{"empty item", "1st,,15th 02:00-04:00", "a day is missing", "Mon-Fri 22:00-23:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.spec)
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("Validate(%q) = %v, want a *SpecError", tt.spec, err)
			}
			if se.Spec != tt.spec || !strings.Contains(se.Problem, tt.problem) || se.Example != tt.example {
				t.Errorf("Validate(%q) = %+v, want problem containing %q and example %q", tt.spec, *se, tt.problem, tt.example)
			}
			if err := Validate(se.Example); err != nil {
				t.Errorf("the suggested example %q is itself invalid: %v", se.Example, err)
			}
		})
	}
}

// TestUnknownFormsListTheAccepted: a form that is not recognized names
// itself and lists every accepted form.
func TestUnknownFormsListTheAccepted(t *testing.T) {
	for _, spec := range []string{"second Tue 22:00-23:00", "Fry 18:00-19:00", "Tue 22:00", "Fri"} {
		err := Validate(spec)
		if err == nil {
			t.Fatalf("Validate(%q) accepted it", spec)
		}
		for _, form := range []string{"2nd Tue", "last Fri", "Sat after 2nd Tue", "1st", "2026-12-24", "Mon-Fri"} {
			if !strings.Contains(err.Error(), form) {
				t.Errorf("Validate(%q) = %q, does not list the form %q", spec, err, form)
			}
		}
	}
}

// TestAtCalendar: monthly and dated windows over month and year ends, leap
// days, midnight and the daylight saving changes of Europe/Berlin (the last
// Sundays of March and October) and America/New_York (the 2nd Sunday of
// March, the 1st Sunday of November).
func TestAtCalendar(t *testing.T) {
	const patch = "2nd Tue 22:00-02:00"
	tests := []struct {
		name        string
		zone        string
		allow, deny []string
		at          string // RFC3339
		open        bool
		window      string // the deciding window, "" for none
		nextOpen    string // RFC3339 in the zone, "" for none
		nextClose   string
	}{
		{
			name: "Patch Tuesday opens at 22:00", zone: "Europe/Berlin", allow: []string{patch},
			at:       "2026-12-08T21:59:00+01:00",
			nextOpen: "2026-12-08T22:00:00+01:00", nextClose: "2026-12-09T02:00:00+01:00",
		},
		{
			name: "Patch Tuesday continues into Wednesday", zone: "Europe/Berlin", allow: []string{patch},
			at: "2026-12-09T01:30:00+01:00", open: true, window: patch,
			nextClose: "2026-12-09T02:00:00+01:00", nextOpen: "2027-01-12T22:00:00+01:00",
		},
		{
			name: "the Wednesday after the 1st Tuesday is not inside", zone: "Europe/Berlin", allow: []string{patch},
			at:       "2026-12-02T01:30:00+01:00",
			nextOpen: "2026-12-08T22:00:00+01:00", nextClose: "2026-12-09T02:00:00+01:00",
		},
		{
			name: "after December's Patch Tuesday the next is in January", zone: "America/New_York", allow: []string{patch},
			at:       "2026-12-09T02:00:00-05:00",
			nextOpen: "2027-01-12T22:00:00-05:00", nextClose: "2027-01-13T02:00:00-05:00",
		},
		{
			name: "the Saturday after Patch Tuesday", zone: "UTC", allow: []string{"Sat after 2nd Tue 02:00-06:00"},
			at:       "2026-12-09T12:00:00Z",
			nextOpen: "2026-12-12T02:00:00Z", nextClose: "2026-12-12T06:00:00Z",
		},
		{
			name: "last Friday over the year end", zone: "UTC", allow: []string{"last Fri 20:00-24:00"},
			at:       "2026-12-26T00:00:00Z",
			nextOpen: "2027-01-29T20:00:00Z", nextClose: "2027-01-30T00:00:00Z",
		},
		{
			name: "the last day of the year runs into the new year", zone: "Europe/Berlin", allow: []string{"last 22:00-02:00"},
			at: "2027-01-01T01:00:00+01:00", open: true, window: "last 22:00-02:00",
			nextClose: "2027-01-01T02:00:00+01:00", nextOpen: "2027-01-31T22:00:00+01:00",
		},
		{
			name: "the 1st at the year end", zone: "UTC", allow: []string{"1st 02:00-04:00"},
			at:       "2026-12-31T12:00:00Z",
			nextOpen: "2027-01-01T02:00:00Z", nextClose: "2027-01-01T04:00:00Z",
		},
		{
			name: "the 29th skips February 2027", zone: "UTC", allow: []string{"29th 02:00-04:00"},
			at:       "2027-01-30T00:00:00Z",
			nextOpen: "2027-03-29T02:00:00Z", nextClose: "2027-03-29T04:00:00Z",
		},
		{
			name: "the 29th in a leap year is February 29", zone: "UTC", allow: []string{"29th 02:00-04:00"},
			at:       "2028-02-01T00:00:00Z",
			nextOpen: "2028-02-29T02:00:00Z", nextClose: "2028-02-29T04:00:00Z",
		},
		{
			name: "the last day of February 2028 is the 29th", zone: "UTC", allow: []string{"last 22:00-02:00"},
			at:       "2028-02-28T23:00:00Z",
			nextOpen: "2028-02-29T22:00:00Z", nextClose: "2028-03-01T02:00:00Z",
		},
		{
			name: "the 5th Tuesday is months away", zone: "UTC", allow: []string{"5th Tue 01:00-02:00"},
			at:       "2026-12-30T00:00:00Z",
			nextOpen: "2027-03-30T01:00:00Z", nextClose: "2027-03-30T02:00:00Z",
		},
		{
			name: "a dated blackout over a nightly window", zone: "Europe/Berlin",
			allow: []string{"* 02:00-04:00"}, deny: []string{"2026-12-24 00:00-2026-12-27 00:00"},
			at: "2026-12-24T03:00:00+01:00", window: "2026-12-24 00:00-2026-12-27 00:00",
			nextOpen: "2026-12-27T02:00:00+01:00", nextClose: "2026-12-27T04:00:00+01:00",
		},
		{
			name: "a list of holidays as blackout", zone: "UTC",
			deny: []string{"2026-12-24,2026-12-25,2026-12-31,2027-01-01 00:00-24:00"},
			at:   "2026-12-30T12:00:00Z", open: true,
			nextClose: "2026-12-31T00:00:00Z", nextOpen: "2027-01-02T00:00:00Z",
		},
		{
			name: "a past dated window never opens again", zone: "UTC", allow: []string{"2025-12-24 00:00-2025-12-27 00:00"},
			at: "2026-12-30T12:00:00Z",
		},
		{
			name: "a dated window in the next year is found", zone: "UTC", allow: []string{"2027-12-24 00:00-2027-12-27 00:00"},
			at:       "2026-12-30T12:00:00Z",
			nextOpen: "2027-12-24T00:00:00Z", nextClose: "2027-12-27T00:00:00Z",
		},
		{
			name: "a dated window beyond the horizon is not", zone: "UTC", allow: []string{"2028-12-24 00:00-2028-12-27 00:00"},
			at: "2026-12-30T12:00:00Z",
		},
		{
			name: "a dated window over the Berlin spring change lasts an hour less", zone: "Europe/Berlin",
			allow: []string{"2026-03-29 01:00-2026-03-29 04:00"},
			at:    "2026-03-29T01:30:00+01:00", open: true, window: "2026-03-29 01:00-2026-03-29 04:00",
			nextClose: "2026-03-29T04:00:00+02:00",
		},
		// The Berlin spring change is on the last Sunday of March: 02:00 CET becomes 03:00 CEST.
		{
			name: "Berlin spring: a monthly window in the gap opens at the jump", zone: "Europe/Berlin", allow: []string{"last Sun 02:30-03:30"},
			at:       "2026-03-29T01:30:00+01:00",
			nextOpen: "2026-03-29T03:00:00+02:00", nextClose: "2026-03-29T03:30:00+02:00",
		},
		{
			name: "Berlin spring: a monthly window entirely in the gap is skipped that month", zone: "Europe/Berlin", allow: []string{"last Sun 02:00-03:00"},
			at:       "2026-03-29T01:30:00+01:00",
			nextOpen: "2026-04-26T02:00:00+02:00", nextClose: "2026-04-26T03:00:00+02:00",
		},
		{
			name: "Berlin autumn: the repeated hour is inside on both passes", zone: "Europe/Berlin", allow: []string{"last Sun 02:00-03:00"},
			at: "2026-10-25T02:30:00+01:00", open: true, window: "last Sun 02:00-03:00",
			nextClose: "2026-10-25T03:00:00+01:00", nextOpen: "2026-11-29T02:00:00+01:00",
		},
		{
			name: "Berlin autumn: a window from Saturday night over the change", zone: "Europe/Berlin", allow: []string{"Sat after 2nd Tue 23:00-04:00"},
			// 2026-10-13 is the 2nd Tuesday; the Saturday after is the 17th, not the change.
			at:       "2026-10-24T23:30:00+02:00",
			nextOpen: "2026-11-14T23:00:00+01:00", nextClose: "2026-11-15T04:00:00+01:00",
		},
		{
			name: "Berlin autumn: a nightly window over the change lasts an hour more", zone: "Europe/Berlin", allow: []string{"4th Sat 23:00-04:00"},
			at: "2026-10-25T02:30:00+01:00", open: true, window: "4th Sat 23:00-04:00",
			nextClose: "2026-10-25T04:00:00+01:00", nextOpen: "2026-11-28T23:00:00+01:00",
		},
		// New York: 2026-03-08 02:00 EST becomes 03:00 EDT; 2026-11-01 02:00 EDT becomes 01:00 EST.
		{
			name: "New York spring: the 2nd Sunday's 02:00-03:00 does not exist", zone: "America/New_York", allow: []string{"2nd Sun 02:00-03:00"},
			at:       "2026-03-08T01:59:00-05:00",
			nextOpen: "2026-04-12T02:00:00-04:00", nextClose: "2026-04-12T03:00:00-04:00",
		},
		{
			name: "New York spring: a deny window in the gap ends at the jump", zone: "America/New_York", deny: []string{"2nd Sun 01:30-02:30"},
			at: "2026-03-08T01:45:00-05:00", window: "2nd Sun 01:30-02:30",
			nextOpen: "2026-03-08T03:00:00-04:00", nextClose: "2026-04-12T01:30:00-04:00",
		},
		{
			name: "New York autumn: the 1st Sunday's 01:00-02:00 lasts two hours", zone: "America/New_York", allow: []string{"1st Sun 01:00-02:00"},
			at:       "2026-11-01T00:59:00-04:00",
			nextOpen: "2026-11-01T01:00:00-04:00", nextClose: "2026-11-01T02:00:00-05:00",
		},
		{
			name: "New York autumn: open on the second pass", zone: "America/New_York", allow: []string{"1st Sun 01:00-02:00"},
			at: "2026-11-01T01:30:00-05:00", open: true, window: "1st Sun 01:00-02:00",
			nextClose: "2026-11-01T02:00:00-05:00", nextOpen: "2026-12-06T01:00:00-05:00",
		},
		{
			name: "monthly allow inside a weekly deny stays closed", zone: "UTC",
			allow: []string{patch}, deny: []string{"* 23:00-06:00"},
			at: "2026-12-08T23:30:00Z", window: "* 23:00-06:00",
			nextOpen: "2027-01-12T22:00:00Z", nextClose: "2027-01-12T23:00:00Z",
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
			if d.Open != tt.open || d.Window != tt.window {
				t.Errorf("At(%s) = open %v, window %q (%s); want %v, %q", tt.at, d.Open, d.Window, d.Reason, tt.open, tt.window)
			}
			checkInstant(t, "NextOpen", d.NextOpen, tt.nextOpen, loc)
			checkInstant(t, "NextClose", d.NextClose, tt.nextClose, loc)
		})
	}
}

func TestHorizon(t *testing.T) {
	weekly, err := New([]string{"Tue 22:00-23:00"}, nil, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	monthly, err := New([]string{"Tue 22:00-23:00"}, []string{"2026-12-24 00:00-2026-12-27 00:00"}, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if weekly.Horizon() != Horizon || monthly.Horizon() != CalendarHorizon {
		t.Errorf("horizons %v and %v, want %v and %v", weekly.Horizon(), monthly.Horizon(), Horizon, CalendarHorizon)
	}
}
