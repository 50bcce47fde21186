// Package matcher parses and applies label matchers in Alertmanager's
// syntax: name="value", name!="value", name=~"regexp", name!~"regexp"
// (the value may be unquoted when it holds no space, comma or quote). A
// regular expression is anchored at both ends, as in Prometheus, and a label
// an alert lacks has the empty value, so name="" matches its absence.
//
// Matchers in the configuration may be templates of the node's name
// ({{.Node}}); Expand fills them in.
//
// The package is pure (regexp, text/template): lib/config validates
// matchers with it and the daemon, which links no HTTP client, imports
// lib/config.
package matcher

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"text/template"
)

// Op is a matcher's comparison.
type Op string

// The four operators of Alertmanager's and Prometheus' matchers.
const (
	Equal     Op = "="
	NotEqual  Op = "!="
	Regexp    Op = "=~"
	NotRegexp Op = "!~"
)

// Matcher compares one label of an alert or series with a value.
type Matcher struct {
	Name  string
	Op    Op
	Value string
	re    *regexp.Regexp
}

// Parse reads one matcher such as severity="critical" or
// instance=~"node-1:.*".
func Parse(s string) (Matcher, error) {
	in := strings.TrimSpace(s)
	i := 0
	for i < len(in) && isNameChar(in[i], i == 0) {
		i++
	}
	if i == 0 {
		return Matcher{}, fmt.Errorf("matcher %q: expected a label name (letters, digits, _) first, e.g. severity=\"critical\"", s)
	}
	m := Matcher{Name: in[:i]}
	rest := strings.TrimLeft(in[i:], " \t")
	switch {
	case strings.HasPrefix(rest, "=~"):
		m.Op = Regexp
	case strings.HasPrefix(rest, "!~"):
		m.Op = NotRegexp
	case strings.HasPrefix(rest, "!="):
		m.Op = NotEqual
	case strings.HasPrefix(rest, "="):
		m.Op = Equal
	default:
		return Matcher{}, fmt.Errorf("matcher %q: expected =, !=, =~ or !~ after %s", s, m.Name)
	}
	raw := strings.TrimSpace(rest[len(m.Op):])
	val, err := value(raw)
	if err != nil {
		return Matcher{}, fmt.Errorf("matcher %q: %v", s, err)
	}
	m.Value = val
	if m.Op == Regexp || m.Op == NotRegexp {
		re, err := regexp.Compile("^(?:" + val + ")$")
		if err != nil {
			return Matcher{}, fmt.Errorf("matcher %q: bad regular expression: %v", s, err)
		}
		m.re = re
	}
	return m, nil
}

// value is the matcher's value: a double-quoted string with Go's escapes
// (\" \\ \n …), or the bare text up to the end.
func value(raw string) (string, error) {
	if strings.HasPrefix(raw, `"`) {
		v, err := strconv.Unquote(raw)
		if err != nil {
			return "", fmt.Errorf("value %s is not one double-quoted string (escape \" and \\ with a backslash)", raw)
		}
		return v, nil
	}
	if strings.ContainsAny(raw, "\" \t,{}") {
		return "", fmt.Errorf("unquoted value %q contains a quote, space, comma or brace; write it in double quotes", raw)
	}
	return raw, nil
}

func isNameChar(c byte, first bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

// Matches reports whether labels satisfy m; a missing label is "".
func (m Matcher) Matches(labels map[string]string) bool {
	v := labels[m.Name]
	switch m.Op {
	case Equal:
		return v == m.Value
	case NotEqual:
		return v != m.Value
	case Regexp:
		return m.re.MatchString(v)
	case NotRegexp:
		return !m.re.MatchString(v)
	}
	return false
}

// String is m in the syntax Parse reads.
func (m Matcher) String() string { return m.Name + string(m.Op) + strconv.Quote(m.Value) }

// All reports whether labels satisfy every matcher (true for none).
func All(ms []Matcher, labels map[string]string) bool {
	for _, m := range ms {
		if !m.Matches(labels) {
			return false
		}
	}
	return true
}

// TemplateData is what a templated matcher or expression may use.
type TemplateData struct {
	// Node is this node's name (node_name).
	Node string
}

// Expand fills the template text with data: {{.Node}} becomes the node's
// name. An unknown field or function is an error.
func Expand(text string, data TemplateData) (string, error) {
	if !strings.Contains(text, "{{") {
		return text, nil
	}
	t, err := template.New("matcher").Option("missingkey=error").Parse(text)
	if err != nil {
		return "", fmt.Errorf("template %q: %v", text, cleanTemplateErr(err))
	}
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("template %q: %v (only {{.Node}} is known)", text, cleanTemplateErr(err))
	}
	return b.String(), nil
}

// ParseTemplate expands text for data and parses the result.
func ParseTemplate(text string, data TemplateData) (Matcher, error) {
	s, err := Expand(text, data)
	if err != nil {
		return Matcher{}, err
	}
	return Parse(s)
}

// ParseAll parses templated matchers for data.
func ParseAll(texts []string, data TemplateData) ([]Matcher, error) {
	out := make([]Matcher, 0, len(texts))
	for _, s := range texts {
		m, err := ParseTemplate(s, data)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// cleanTemplateErr drops text/template's "template: matcher:1:2: " prefix.
func cleanTemplateErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); strings.HasPrefix(s, "template: ") && i >= 0 {
		return s[i+2:]
	}
	return s
}
