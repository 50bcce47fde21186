package window

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// wm is a minute of the week for day (0 = Monday) and hh:mm.
func wm(day, hh, mm int) int { return day*minutesPerDay + hh*60 + mm }

const (
	mon = iota
	tue
	wed
	thu
	fri
	sat
	sun
)

func TestParseValid(t *testing.T) {
	daily := func(start, length int, days ...int) []interval {
		var out []interval
		for _, d := range days {
			out = append(out, interval{start: d*minutesPerDay + start, length: length})
		}
		return out
	}
	all := []int{mon, tue, wed, thu, fri, sat, sun}
	tests := []struct {
		name string
		spec string
		want []interval
	}{
		{"span over the weekend", "Fri 18:00-Mon 08:00", []interval{{wm(fri, 18, 0), 62 * 60}}},
		{"span within a day", "Tue 22:00-Tue 23:00", []interval{{wm(tue, 22, 0), 60}}},
		{"span ending later the same weekday wraps the week", "Mon 08:00-Mon 07:00", []interval{{wm(mon, 8, 0), minutesPerWeek - 60}}},
		{"span ending Sunday 24:00", "Sat 00:00-Sun 24:00", []interval{{wm(sat, 0, 0), 2 * minutesPerDay}}},
		{"span with blanks around the dash", "  fri 18:00 -  MON 08:00 ", []interval{{wm(fri, 18, 0), 62 * 60}}},
		{"every day wrapping midnight", "* 23:00-06:00", daily(23*60, 7*60, all...)},
		{"one day", "Tue 22:00-23:00", daily(22*60, 60, tue)},
		{"full day name, any case", "TUESDAY 22:00-23:00", daily(22*60, 60, tue)},
		{"one-digit hour", "Tue 9:05-10:00", daily(9*60+5, 55, tue)},
		{"wrapping midnight belongs to the start day", "Fri 23:00-01:00", daily(23*60, 120, fri)},
		{"Sunday night wraps into Monday", "Sun 23:00-01:00", daily(23*60, 120, sun)},
		{"24:00 as end", "Sat 00:00-24:00", daily(0, minutesPerDay, sat)},
		{"every day, all day", "* 00:00-24:00", daily(0, minutesPerDay, all...)},
		{"day range", "Mon-Fri 22:00-23:00", daily(22*60, 60, mon, tue, wed, thu, fri)},
		{"day range with blanks", "Mon - Fri 22:00 - 23:00", daily(22*60, 60, mon, tue, wed, thu, fri)},
		{"day list", "Mon,Wed,Fri 10:00-11:30", daily(10*60, 90, mon, wed, fri)},
		{"day list with blanks", "Mon, Wed ,Fri 10:00-11:30", daily(10*60, 90, mon, wed, fri)},
		{"day range wrapping the week", "Sat-Mon 01:00-03:00", daily(60, 120, mon, sat, sun)},
		{"list of a range and a day", "Mon-Wed,Sat 01:00-02:00", daily(60, 60, mon, tue, wed, sat)},
		{"range of one day", "Wed-Wed 01:00-02:00", daily(60, 60, wed)},
		{"repeated days count once", "Mon,mon,Monday 01:00-02:00", daily(60, 60, mon)},
		{"full names in a range", "monday-friday 22:00-23:00", daily(22*60, 60, mon, tue, wed, thu, fri)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Parse(tt.spec)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.spec, err)
			}
			if !slices.Equal(w.intervals, tt.want) {
				t.Errorf("Parse(%q) intervals = %v, want %v", tt.spec, w.intervals, tt.want)
			}
			if w.Spec != strings.TrimSpace(tt.spec) {
				t.Errorf("Spec = %q, want the trimmed input", w.Spec)
			}
			if err := Validate(tt.spec); err != nil {
				t.Errorf("Validate(%q) = %v, Parse accepted it", tt.spec, err)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		problem string // a substring of the problem
		example string
	}{
		{"empty", "", "empty window", "Tue 22:00-23:00"},
		{"blank", "   ", "empty window", "Tue 22:00-23:00"},
		{"day only", "Fri", "missing the time span", "Tue 22:00-23:00"},
		{"no dash", "Tue 22:00 23:00", `has no "-"`, "Tue 22:00-23:00"},
		{"unknown day", "Fry 18:00-19:00", `unknown day "Fry"`, "Mon-Fri 22:00-23:00"},
		{"abbreviation of four letters", "Tues 18:00-19:00", `unknown day "Tues"`, "Mon-Fri 22:00-23:00"},
		{"unknown end of range", "Mon-Fro 18:00-19:00", `unknown day "Fro"`, "Mon-Fri 22:00-23:00"},
		{"empty list item", "Mon,,Fri 18:00-19:00", "a day is missing", "Mon-Fri 22:00-23:00"},
		{"star in a list", "*,Mon 18:00-19:00", `"*" stands alone`, "Mon-Fri 22:00-23:00"},
		{"hour out of range", "Tue 25:00-26:00", `"25:00" is out of range`, "Tue 22:00-23:00"},
		{"minute out of range", "Tue 22:00-22:60", `"22:60" is out of range`, "Tue 22:00-23:00"},
		{"no colon", "Tue 2200-2300", `"2200" is not HH:MM`, "Tue 22:00-23:00"},
		{"one-digit minutes", "Tue 22:0-23:00", `"22:0" is not HH:MM`, "Tue 22:00-23:00"},
		{"letters in the hour", "Tue 2a:00-23:00", `"2a:00" is not HH:MM`, "Tue 22:00-23:00"},
		{"am/pm", "Tue 10pm-11pm", `"10pm" is not HH:MM`, "Tue 22:00-23:00"},
		{"empty end", "Tue 22:00-", `"" is not HH:MM`, "Tue 22:00-23:00"},
		{"24:00 as start", "Tue 24:00-01:00", "only allowed as an end", "Tue 22:00-23:00"},
		{"24:30", "Tue 22:00-24:30", `"24:30" is out of range`, "Tue 22:00-23:00"},
		{"start equals end", "Tue 22:00-22:00", "could mean empty or a full day", "Tue 00:00-24:00"},
		{"never is not the only allow window removed", "Tue 22:00-22:00", "with no allow window every hour is allowed", "Tue 00:00-24:00"},
		{"never in the whole week", "Fri 18:00-Fri 18:00", `else deny "* 00:00-24:00"`, "* 00:00-24:00"},
		{"00:00-00:00", "* 00:00-00:00", "could mean empty or a full day", "* 00:00-24:00"},
		{"start equals end on a range", "mon - fri 06:00-6:00", "both 06:00", "mon-fri 00:00-24:00"},
		{"span of zero length", "Fri 18:00-Fri 18:00", "the same instant (Fri 18:00)", "* 00:00-24:00"},
		{"span from Sunday 24:00", "Sun 24:00-Mon 00:00", "only allowed as an end", "Tue 22:00-23:00"},
		{"span equal via 24:00", "Mon 00:00-Sun 24:00", "the same instant (Mon 00:00)", "* 00:00-24:00"},
		{"span from a range", "Mon-Fri 18:00-Mon 08:00", `starts on one day, not "Mon-Fri"`, "Fri 18:00-Mon 08:00"},
		{"span from every day", "* 18:00-Mon 08:00", `starts on one day, not "*"`, "Fri 18:00-Mon 08:00"},
		{"span from an unknown day", "Frei 18:00-Mon 08:00", `unknown day "Frei"`, "Fri 18:00-Mon 08:00"},
		{"span to an unknown day", "Fri 18:00-Mo 08:00", `end day: unknown day "Mo"`, "Fri 18:00-Mon 08:00"},
		{"span to a bad time", "Fri 18:00-Mon 8", `end time "8" is not HH:MM`, "Fri 18:00-Mon 08:00"},
		{"trailing words", "Fri 18:00-Mon 08:00 please", `"08:00 please" is not HH:MM`, "Fri 18:00-Mon 08:00"},
		{"two spans", "Tue 22:00-23:00-24:00", `"23:00-24:00" is not HH:MM`, "Tue 22:00-23:00"},
		{"cron syntax", "0 22 * * 2", "looks like a cron expression", "Tue 22:00-23:00"},
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
			msg := err.Error()
			if !strings.HasPrefix(msg, `"`+tt.spec+`": `) || !strings.Contains(msg, "write it like") {
				t.Errorf("message %q does not start with the quoted spec or lacks the example", msg)
			}
		})
	}
}

func TestShortDay(t *testing.T) {
	for d, want := range []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"} {
		if got := shortDay(d); got != want {
			t.Errorf("shortDay(%d) = %q, want %q", d, got, want)
		}
		if got, ok := lookupDay(strings.ToUpper(want)); !ok || got != d {
			t.Errorf("lookupDay(%q) = %d, %v", want, got, ok)
		}
	}
}
