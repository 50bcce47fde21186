package config

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Issue 17: nothing in a configuration is silently dropped or coerced.
func TestNothingDroppedOrCoerced(t *testing.T) {
	tests := []struct {
		name   string
		main   string
		dropin string // config.d/50-x.yaml when set
		want   []string
	}{
		{"second document in a drop-in", "node_name: a\n", "---\n# managed\n---\nwindows:\n  deny: [\"* 00:00-24:00\"]\n",
			[]string{"50-x.yaml:3: a second YAML document starts here"}},
		{"second document in the main file", "node_name: a\n---\ndry_run: true\n", "",
			[]string{"config.yaml:2: a second YAML document starts here"}},
		{"an empty second document", "node_name: a\n---\n", "", []string{"config.yaml:2: a second YAML document"}},
		{"fraction into an integer", "max_holders: 2.9\n", "",
			[]string{`config.yaml:1: max_holders: wrong type: a number "2.9" where a whole number or a percentage such as "10%" is expected`}},
		{"fraction into a seconds field", "lock_ttl_sec: 30.5\n", "", []string{`lock_ttl_sec: wrong type: a number "30.5"`}},
		{"quoted yes into a boolean", "dry_run: \"yes\"\n", "", []string{`dry_run: wrong type: a string "yes" where true or false`}},
		{"on into a nested boolean", "metrics:\n  enabled: 'on'\n", "", []string{`config.yaml:2: metrics.enabled: wrong type: a string "on"`}},
		{"fraction in a list of integers", "reboot_required_detectors:\n  - type: command\n    cmd: [/bin/x]\n    success_exit_codes: [1.5]\n", "",
			[]string{`reboot_required_detectors[0].success_exit_codes[0]: wrong type: a number "1.5"`}},
		{"string into an integer is listed once", "max_holders: x\n", "", []string{`max_holders: wrong type: a string "x"`}},
		{"through an alias", "dry_run: &v \"yes\"\nmetrics: {enabled: *v}\n", "", []string{"dry_run: wrong type", "(and 1 more"}},
		{"invalid UTF-8 names its line", "node_name: a\ngroup: \xffx\n", "", []string{"config.yaml:2: invalid UTF-8 at column 8"}},
		{"invalid UTF-8 in a drop-in", "node_name: a\n", "# \xc3\n", []string{"50-x.yaml:1: invalid UTF-8 at column 3"}},
		{"schema problems of every file", "bogus: 1\n", "max_holders: 1.5\n",
			[]string{"config.yaml:1: bogus: unknown field", "(and 1 more"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := writeFile(t, dir, "config.yaml", tt.main, 0o644)
			if tt.dropin != "" {
				writeFile(t, dir, "config.d/50-x.yaml", tt.dropin, 0o644)
			}
			_, err := Load(p, true)
			if err == nil {
				t.Fatalf("Load accepted it; want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not contain %q", err, w)
				}
			}
			if exitcode.From(err) != 2 || strings.Contains(err.Error(), "\n") {
				t.Errorf("want one line with exit 2, got %d %q", exitcode.From(err), err)
			}
		})
	}
}

func TestOneLeadingMarkerIsFine(t *testing.T) {
	cfg, err := Parse("stdin", []byte("---\nmax_holders: 3\n"))
	if err != nil || cfg.MaxHolders != Count(3) {
		t.Fatalf("got %v %v", err, cfg.MaxHolders)
	}
	cfg, err = Parse("stdin", []byte("max_holders: 3\ndry_run: true\nmetrics: {enabled: false}\n"))
	if err != nil || !cfg.DryRun {
		t.Fatalf("got %v", err)
	}
}

// Validate lists the schema problems Load found together with the rules'.
func TestEveryStageListed(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "config.yaml", "node_name: a\nlock_tll_sec: 30\nlock_ttl_sec: 2\nmax_holders: \"x\"\nwindows:\n  deny: [bogus]\n", 0o644)
	writeFile(t, dir, "config.d/10-a.yaml", "dry_run: \"no\"\n", 0o644)
	cfg, err := Load(p, true)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Load: %v", err)
	}
	err = Validate(&cfg, p, func(s string) error {
		if s == "bogus" {
			return errors.New("cannot parse")
		}
		return nil
	})
	if !errors.As(err, &ve) {
		t.Fatalf("Validate: %v", err)
	}
	var got []string
	for _, pr := range ve.Problems {
		got = append(got, filepath.Base(pr.Where)+" "+pr.Field)
	}
	want := []string{"config.yaml:2 lock_tll_sec", "config.yaml:4 max_holders", "10-a.yaml:1 dry_run",
		"config.yaml:3 lock_ttl_sec", "config.yaml:6 windows.deny[0]"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("problems\n got %v\nwant %v", got, want)
	}
}

// The configuration crosses to the cluster child as JSON
// (driver/protocol.Request) under the same names as in YAML: every field
// has a json tag equal to its yaml tag.
func TestJSONNamesAreTheYAMLNames(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(t *testing.T, typ reflect.Type, path string)
	walk = func(t *testing.T, typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || !strings.HasPrefix(typ.PkgPath(), "github.com/clusterrebootd/clusterrebootd/") {
			return
		}
		if reflect.PointerTo(typ).Implements(reflect.TypeFor[json.Unmarshaler]()) {
			return // its own form (Budget: a count or a percentage)
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			if y, j := f.Tag.Get("yaml"), f.Tag.Get("json"); y == "" || y != j {
				t.Errorf("%s%s: yaml %q, json %q", path, f.Name, y, j)
			}
			walk(t, f.Type, path+f.Name+".")
		}
	}
	walk(t, reflect.TypeOf(Config{}), "")
	if len(seen) < 10 {
		t.Fatalf("only %d types walked", len(seen))
	}
}
