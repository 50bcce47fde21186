package matcher

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		want     Matcher
		err      string
	}{
		{"equal", `severity="critical"`, Matcher{Name: "severity", Op: Equal, Value: "critical"}, ""},
		{"not equal", `env!="dev"`, Matcher{Name: "env", Op: NotEqual, Value: "dev"}, ""},
		{"regexp", `instance=~"n1:.*"`, Matcher{Name: "instance", Op: Regexp, Value: "n1:.*"}, ""},
		{"not regexp", `job!~"test|dev"`, Matcher{Name: "job", Op: NotRegexp, Value: "test|dev"}, ""},
		{"spaces", `  alertname = "Watchdog" `, Matcher{Name: "alertname", Op: Equal, Value: "Watchdog"}, ""},
		{"unquoted", `alertname=Watchdog`, Matcher{Name: "alertname", Op: Equal, Value: "Watchdog"}, ""},
		{"escaped quote", `msg="a \"b\""`, Matcher{Name: "msg", Op: Equal, Value: `a "b"`}, ""},
		{"empty value", `team=""`, Matcher{Name: "team", Op: Equal, Value: ""}, ""},
		{"underscore name", `_x1="y"`, Matcher{Name: "_x1", Op: Equal, Value: "y"}, ""},
		{"no name", `="x"`, Matcher{}, "expected a label name"},
		{"digit first", `1a="x"`, Matcher{}, "expected a label name"},
		{"no operator", `severity`, Matcher{}, "expected =, !=, =~ or !~"},
		{"bad operator", `severity<"x"`, Matcher{}, "expected =, !=, =~ or !~"},
		{"unterminated", `severity="crit`, Matcher{}, "not one double-quoted string"},
		{"trailing", `severity="crit" x`, Matcher{}, "not one double-quoted string"},
		{"unquoted space", `a=b c`, Matcher{}, "write it in double quotes"},
		{"bad regexp", `a=~"("`, Matcher{}, "bad regular expression"},
		{"empty", ``, Matcher{}, "expected a label name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse(%q) error %v, want %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.want.Name || got.Op != tt.want.Op || got.Value != tt.want.Value {
				t.Errorf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	labels := map[string]string{"alertname": "NodeDown", "instance": "n1:9100", "severity": "critical"}
	tests := []struct {
		in   string
		want bool
	}{
		{`alertname="NodeDown"`, true},
		{`alertname="Node"`, false},
		{`alertname!="Watchdog"`, true},
		{`instance=~"n1:.*"`, true},
		{`instance=~"n1"`, false}, // anchored
		{`instance!~"n2:.*"`, true},
		{`severity=~"warning|critical"`, true},
		{`team=""`, true}, // a missing label is empty
		{`team!=""`, false},
		{`team=~".*"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			m, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Matches(labels); got != tt.want {
				t.Errorf("%s matches %v = %v, want %v", tt.in, labels, got, tt.want)
			}
		})
	}
}

func TestParseTemplate(t *testing.T) {
	tests := []struct {
		name, in, want, err string
	}{
		{"node", `instance=~"{{.Node}}:.*"`, `instance=~"web-1:.*"`, ""},
		{"no template", `severity="critical"`, `severity="critical"`, ""},
		{"unknown field", `instance="{{.Host}}"`, "", "only {{.Node}} is known"},
		{"bad template", `instance="{{.Node"`, "", "template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseTemplate(tt.in, TemplateData{Node: "web-1"})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.String() != tt.want {
				t.Errorf("got %s, want %s", m, tt.want)
			}
		})
	}
}

// Whatever Parse accepts, its String form parses back to the same matcher.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`a="b"`, `a!~"x|y"`, `a=~".*"`, `a=b`, `a="\"q\""`, `=`, `a=~"("`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := Parse(s)
		if err != nil {
			return
		}
		back, err := Parse(m.String())
		if err != nil {
			t.Fatalf("Parse(%q) = %s, which does not parse: %v", s, m, err)
		}
		if back.Name != m.Name || back.Op != m.Op || back.Value != m.Value {
			t.Fatalf("round trip of %q: %+v != %+v", s, back, m)
		}
		_ = m.Matches(map[string]string{m.Name: m.Value})
	})
}
