// Package matcher parses Alertmanager label matchers (`name="value"`,
// `name!="value"`, `name=~"regex"`, `name!~"regex"`, as amtool and the
// Alertmanager UI write them) and renders the configured ones for one node
// through text/template.
//
// It links no net/http: lib/config validates silences.matchers with it in
// the lean daemon, lib/silence sends what it parses to Alertmanager from the
// cluster child.
package matcher

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Matcher is one label matcher, in the shape of Alertmanager's v2 API.
type Matcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex"`
	IsEqual bool   `json:"isEqual"`
}

// String writes the matcher back in the text grammar.
func (m Matcher) String() string {
	op := "="
	switch {
	case m.IsRegex && m.IsEqual:
		op = "=~"
	case m.IsRegex:
		op = "!~"
	case !m.IsEqual:
		op = "!="
	}
	v := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(m.Value)
	return m.Name + op + `"` + v + `"`
}

// Matches reports whether value satisfies the matcher (regexes anchored, as
// Alertmanager anchors them). A regex that does not compile matches nothing.
func (m Matcher) Matches(value string) bool {
	ok := m.Value == value
	if m.IsRegex {
		re, err := regexp.Compile("^(?:" + m.Value + ")$")
		ok = err == nil && re.MatchString(value)
	}
	return ok == m.IsEqual
}

// Parse reads one matcher: a label name, an operator (=, !=, =~, !~) and a
// value, quoted ("…", with \" \\ \n escapes) or bare, spaces around each
// ignored. A regex must compile (RE2, anchored as Alertmanager anchors it).
func Parse(s string) (Matcher, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && nameByte(t[i], i == 0) {
		i++
	}
	if i == 0 {
		return Matcher{}, fmt.Errorf("%q does not start with a label name (letters, digits, _ and :, not a digit first), e.g. instance=~\"web-1(:[0-9]+)?\"", s)
	}
	m := Matcher{Name: t[:i]}
	rest := strings.TrimLeft(t[i:], " \t")
	switch {
	case strings.HasPrefix(rest, "=~"):
		m.IsRegex, m.IsEqual, rest = true, true, rest[2:]
	case strings.HasPrefix(rest, "!~"):
		m.IsRegex, rest = true, rest[2:]
	case strings.HasPrefix(rest, "!="):
		rest = rest[2:]
	case strings.HasPrefix(rest, "="):
		m.IsEqual, rest = true, rest[1:]
	default:
		return Matcher{}, fmt.Errorf("%q: after the label name %s comes one of =, !=, =~ or !~", s, m.Name)
	}
	v, err := unquote(strings.TrimSpace(rest))
	if err != nil {
		return Matcher{}, fmt.Errorf("%q: %v", s, err)
	}
	m.Value = v
	if m.IsRegex {
		if _, err := regexp.Compile("^(?:" + v + ")$"); err != nil {
			return Matcher{}, fmt.Errorf("%q: the regex does not compile: %v", s, err)
		}
	}
	return m, nil
}

func nameByte(c byte, first bool) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':' || (!first && c >= '0' && c <= '9')
}

// unquote reads a matcher value as Alertmanager 0.25 does: an optional
// pair of double quotes, \" \\ and \n escapes (other escapes kept as
// written), no unescaped quote inside.
func unquote(raw string) (string, error) {
	if !utf8.ValidString(raw) {
		return "", fmt.Errorf("the value is not valid UTF-8")
	}
	expectQuote := strings.HasPrefix(raw, `"`)
	if expectQuote {
		raw = raw[1:]
	}
	var b strings.Builder
	escaped := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if escaped {
			escaped = false
			switch c {
			case 'n':
				b.WriteByte('\n')
			case '"', '\\':
				b.WriteByte(c)
			default:
				b.WriteByte('\\')
				b.WriteByte(c)
			}
			continue
		}
		switch {
		case c == '\\' && i < len(raw)-1:
			escaped = true
		case c == '"' && expectQuote && i == len(raw)-1:
			expectQuote = false
		case c == '"':
			return "", fmt.Errorf("the value holds an unescaped double quote: write \\\"")
		default:
			b.WriteByte(c)
		}
	}
	if expectQuote {
		return "", fmt.Errorf("the value's closing double quote is missing")
	}
	return b.String(), nil
}

// Data is what a matcher template sees.
type Data struct {
	// Node is node_name, Group the node's group ("" for none), Lock the
	// lock_key.
	Node, Group, Lock string
}

// Render executes each template with d (a missing field is an error) and
// parses the result. At least one matcher must not match the empty string:
// Alertmanager refuses a silence that would match every alert.
func Render(templates []string, d Data) ([]Matcher, error) {
	out := make([]Matcher, 0, len(templates))
	for i, src := range templates {
		m, err := RenderOne(src, d)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no matcher: name at least one, e.g. instance=~\"{{.Node}}(:[0-9]+)?\"")
	}
	for _, m := range out {
		if !m.Matches("") {
			return out, nil
		}
	}
	return nil, fmt.Errorf("every matcher also matches alerts without the label (the empty value): the silence would be far too wide; name at least one that does not")
}

// RenderOne expands one template with d and parses the result.
func RenderOne(src string, d Data) (Matcher, error) {
	text, err := expand(src, d)
	if err != nil {
		return Matcher{}, fmt.Errorf("template %q: %v", src, err)
	}
	m, err := Parse(text)
	if err != nil && text != src {
		return m, fmt.Errorf("template %q: %w", src, err)
	}
	return m, err
}

// expand substitutes the template's actions. The language is the subset of
// Go's text/template that a matcher needs: {{.Node}}, {{.Group}}, {{.Lock}},
// each optionally through regexQuote ({{regexQuote .Node}} or
// {{.Node | regexQuote}}). Linking text/template itself would add 1.5 MB to
// every binary that validates the configuration, the lean daemon included
// (its reflection keeps every exported method alive; docs/decisions.md).
func expand(src string, d Data) (string, error) {
	var b strings.Builder
	rest := src
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			if j := strings.Index(rest, "}}"); j >= 0 {
				return "", fmt.Errorf("\"}}\" without \"{{\"")
			}
			b.WriteString(rest)
			return b.String(), nil
		}
		b.WriteString(rest[:i])
		j := strings.Index(rest[i:], "}}")
		if j < 0 {
			return "", fmt.Errorf("unclosed action (\"{{\" without \"}}\")")
		}
		v, err := action(strings.TrimSpace(rest[i+2:i+j]), d)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		rest = rest[i+j+2:]
	}
}

// action evaluates one {{…}}.
func action(a string, d Data) (string, error) {
	f := strings.Fields(strings.ReplaceAll(a, "|", " | "))
	quote := false
	switch {
	case len(f) == 2 && f[0] == "regexQuote":
		f, quote = f[1:], true
	case len(f) == 3 && f[1] == "|" && f[2] == "regexQuote":
		f, quote = f[:1], true
	}
	if len(f) != 1 {
		return "", fmt.Errorf("{{%s}} is not supported: use {{.Node}}, {{.Group}} or {{.Lock}}, optionally as {{regexQuote .Node}}", a)
	}
	var v string
	switch f[0] {
	case ".Node":
		v = d.Node
	case ".Group":
		v = d.Group
	case ".Lock":
		v = d.Lock
	default:
		return "", fmt.Errorf("{{%s}}: unknown field %s (the fields are .Node, .Group and .Lock)", a, f[0])
	}
	if quote {
		v = regexp.QuoteMeta(v)
	}
	return v, nil
}
