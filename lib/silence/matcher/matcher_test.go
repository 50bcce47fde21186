package matcher

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Matcher
		err      string
	}{
		{"equal quoted", `instance="web-1:9100"`, Matcher{Name: "instance", Value: "web-1:9100", IsEqual: true}, ""},
		{"equal bare with spaces", ` job = node `, Matcher{Name: "job", Value: "node", IsEqual: true}, ""},
		{"not equal", `env!="dev"`, Matcher{Name: "env", Value: "dev"}, ""},
		{"regex", `instance=~"web-1(:[0-9]+)?"`, Matcher{Name: "instance", Value: "web-1(:[0-9]+)?", IsRegex: true, IsEqual: true}, ""},
		{"not regex", `severity!~"info|none"`, Matcher{Name: "severity", Value: "info|none", IsRegex: true}, ""},
		{"escapes", `msg="a\"b\\c\nd\.e"`, Matcher{Name: "msg", Value: "a\"b\\c\nd\\.e", IsEqual: true}, ""},
		{"colon name", `a:b="x"`, Matcher{Name: "a:b", Value: "x", IsEqual: true}, ""},
		{"no name", `="x"`, Matcher{}, "label name"},
		{"digit first", `1a="x"`, Matcher{}, "label name"},
		{"no operator", `instance`, Matcher{}, "one of =, !=, =~ or !~"},
		{"bad operator", `instance<"x"`, Matcher{}, "one of"},
		{"open quote", `instance="x`, Matcher{}, "closing double quote"},
		{"escaped close", `instance="x\"`, Matcher{}, "closing double quote"},
		{"inner quote", `instance="a"b"`, Matcher{}, "unescaped double quote"},
		{"bad regex", `instance=~"web-(1"`, Matcher{}, "does not compile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse(%q) = %+v, %v; want error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
			back, err := Parse(got.String())
			if err != nil || back != got {
				t.Fatalf("String() %q parses back as %+v, %v", got.String(), back, err)
			}
		})
	}
}

func TestRender(t *testing.T) {
	d := Data{Node: "web-1.example.com", Group: "web", Lock: "/cluster/clusterrebootd/lock"}
	for _, tc := range []struct {
		name string
		in   []string
		want []string
		err  string
	}{
		{"node regex", []string{`instance=~"{{.Node}}(:[0-9]+)?"`}, []string{`instance=~"web-1.example.com(:[0-9]+)?"`}, ""},
		{"quoted node", []string{`instance=~"{{regexQuote .Node}}(:[0-9]+)?"`, `group="{{.Group}}"`},
			[]string{`instance=~"web-1\\.example\\.com(:[0-9]+)?"`, `group="web"`}, ""},
		{"missing field", []string{`instance="{{.Host}}"`}, nil, ".Node, .Group and .Lock"},
		{"pipe quote", []string{`instance=~"{{ .Node | regexQuote }}"`}, []string{`instance=~"web-1\\.example\\.com"`}, ""},
		{"unsupported", []string{`instance="{{printf "%s" .Node}}"`}, nil, "not supported"},
		{"stray close", []string{`instance="x}}"`}, nil, "without"},
		{"bad template", []string{`instance="{{.Node"`}, nil, "template"},
		{"none", nil, nil, "no matcher"},
		{"all match empty", []string{`instance=~".*"`, `job!="x"`}, nil, "far too wide"},
		{"rendered unparsable", []string{`{{.Node}}`}, nil, "one of =, !=, =~ or !~"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render(tc.in, d)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Render = %v, %v; want error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range got {
				if m.String() != tc.want[i] {
					t.Errorf("[%d] = %s, want %s", i, m, tc.want[i])
				}
			}
		})
	}
}

func TestMatches(t *testing.T) {
	m, _ := Parse(`instance=~"web-1(:[0-9]+)?"`)
	for v, want := range map[string]bool{"web-1": true, "web-1:9100": true, "web-10": false, "xweb-1": false, "": false} {
		if m.Matches(v) != want {
			t.Errorf("%s matches %q = %v", m, v, !want)
		}
	}
}
