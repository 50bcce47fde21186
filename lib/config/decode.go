package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// decodeInto decodes one file strictly on top of cfg. A file that cannot be
// read as YAML at all (invalid UTF-8, a syntax error, a second document) is
// an error that stops loading. A file that parses but does not fit the
// schema (unknown keys, wrong types) is applied as far as it fits, and its
// problems are kept in cfg.problems and returned as a *ValidationError, so
// that validate-config can list them together with the rule checks.
func decodeInto(cfg *Config, path string, data []byte) error {
	if line, col, ok := invalidUTF8(data); !ok {
		return exitcode.Errorf(exitcode.Config, "config %s:%d: invalid UTF-8 at column %d; save the file as UTF-8", path, line, col)
	}
	doc, err := oneDocument(path, data)
	if err != nil {
		return err
	}
	probs := checkTypes(path, doc)
	err = decodeStrict(cfg, data)
	var crash decoderPanic
	if errors.As(err, &crash) {
		return exitcode.Errorf(exitcode.Config, "config %s: the YAML decoder cannot read this file: "+
			"check its merge keys (<< must be followed by a mapping) and that no key is itself a mapping or a list", path)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		var ve *ValidationError
		if !errors.As(decodeError(path, data, err), &ve) {
			return decodeError(path, data, err)
		}
		// checkTypes already named the values yaml.v3 also refuses.
		seen := map[string]bool{}
		for _, p := range probs {
			seen[p.Where] = true
		}
		for _, p := range ve.Problems {
			if !seen[p.Where] || !scalarTypeMessage(p.Message) {
				probs = append(probs, p)
			}
		}
	}
	if cfg.origin == nil {
		cfg.origin = origins{}
	}
	cfg.origin.record(path, doc)
	cfg.sources = append(cfg.sources, path)
	if len(probs) == 0 {
		return nil
	}
	// In the file's order, as a reader goes through it.
	slices.SortStableFunc(probs, func(a, b Problem) int { return cmp.Compare(lineOf(a.Where), lineOf(b.Where)) })
	cfg.problems = append(cfg.problems, probs...)
	return exitcode.New(exitcode.Config, &ValidationError{Source: path, Problems: probs})
}

// decoderPanic is a panic of yaml.v3's decoder, as an error. yaml.v3
// panics on some documents it parses, such as a merge key (<<) beside a key
// that is itself a mapping ("metrics: {<<, {0}}", found by FuzzLoad): a
// configuration file must never crash the tool that reads it, nor a daemon
// reloading it on SIGHUP.
type decoderPanic struct{ v any }

func (p decoderPanic) Error() string { return fmt.Sprintf("yaml decoder panic: %v", p.v) }

// decodeStrict decodes data into cfg with unknown fields refused, and
// returns a panic of the decoder as a decoderPanic.
func decodeStrict(cfg *Config, data []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = decoderPanic{r}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	return dec.Decode(cfg)
}

// lineOf is the line number of "file:line", 0 when there is none.
func lineOf(where string) int {
	i := strings.LastIndexByte(where, ':')
	n, err := strconv.Atoi(where[i+1:])
	if i < 0 || err != nil {
		return 0
	}
	return n
}

// invalidUTF8 finds the first byte that is not UTF-8 and returns its line
// and column (1-based); ok when there is none.
func invalidUTF8(data []byte) (line, col int, ok bool) {
	if utf8.Valid(data) {
		return 0, 0, true
	}
	line, start := 1, 0
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return line, utf8.RuneCount(data[start:i]) + 1, false
		}
		if data[i] == '\n' {
			line, start = line+1, i+1
		}
		i += size
	}
	return line, 1, false
}

// oneDocument parses data and returns its only YAML document (nil for an
// empty file). A second document ("---" again, as templating tools emit) is
// refused: yaml.v3 decodes only the first, so everything after the second
// marker (a blackout window, say) would be dropped without a word.
func oneDocument(path string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first *yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return first, nil
		}
		if err != nil {
			return nil, exitcode.Errorf(exitcode.Config, "config %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if first != nil {
			return nil, exitcode.Errorf(exitcode.Config, "config %s:%d: a second YAML document starts here, and only one is read; "+
				"a configuration file holds one document: remove the extra '---' line (a leading one is fine)", path, n.Line)
		}
		first = &n
	}
}

// checkTypes finds the scalars yaml.v3 would quietly convert: a number with
// a fraction into an integer field (2.9 becomes 2) and a quoted "yes" or
// "on" into a boolean. The documented rule is that a wrong type is an error.
func checkTypes(path string, doc *yaml.Node) []Problem {
	if doc == nil || len(doc.Content) == 0 {
		return nil
	}
	tc := typeChecker{path: path, seen: map[*yaml.Node]bool{}}
	tc.walk("", doc.Content[0], reflect.TypeOf(Config{}))
	return tc.problems
}

type typeChecker struct {
	path     string
	problems []Problem
	// seen stops at an alias already followed: an alias bomb is yaml.v3's
	// to refuse, not a reason to walk for ever.
	seen map[*yaml.Node]bool
}

func (tc *typeChecker) walk(field string, n *yaml.Node, t reflect.Type) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil || tc.seen[n.Alias] {
			return
		}
		tc.seen[n.Alias] = true
		n = n.Alias
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" {
				tc.walk(field, v, t)
				continue
			}
			if ft, ok := fieldType(t, k.Value); ok {
				tc.walk(join(field, k.Value), v, ft)
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, c := range n.Content {
			tc.walk(fmt.Sprintf("%s[%d]", field, i), c, t.Elem())
		}
	case reflect.Int, reflect.Bool:
		want, what := "!!int", "an integer"
		if t.Kind() == reflect.Bool {
			want, what = "!!bool", "true or false"
		}
		if n.Kind != yaml.ScalarNode || n.ShortTag() == want || n.ShortTag() == "!!null" {
			return
		}
		got := yamlTags[n.ShortTag()]
		if got == "" {
			got = n.ShortTag()
		}
		tc.problems = append(tc.problems, Problem{Field: field, Where: fmt.Sprintf("%s:%d", tc.path, n.Line),
			Message: fmt.Sprintf("wrong type: %s %q where %s is expected; see docs/configuration.md", got, n.Value, what)})
	}
}

// scalarTypeMessage reports whether a problem from yaml.v3 is one that
// checkTypes finds as well (a wrong scalar for an integer or a boolean).
func scalarTypeMessage(msg string) bool {
	return strings.HasPrefix(msg, "wrong type: ") &&
		(strings.Contains(msg, " where an integer is expected") || strings.Contains(msg, " where true or false is expected"))
}

// fieldType is the type of the field of struct t whose yaml tag is name.
func fieldType(t reflect.Type, name string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag == name && f.IsExported() {
			return f.Type, true
		}
	}
	return nil, false
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
