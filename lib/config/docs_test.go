package config

import (
	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
	"gopkg.in/yaml.v3"

	"os"
	"reflect"
	"strings"
	"testing"
)

// yamlPaths lists every leaf YAML key path of t, e.g. "etcd_tls.ca_file".
func yamlPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		p := prefix + tag
		if f.Type.Kind() == reflect.Struct {
			out = append(out, yamlPaths(f.Type, p+".")...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// Every field is documented in docs/configuration.md and appears in the
// installed template: the docs cannot fall behind the code.
func TestEveryFieldDocumented(t *testing.T) {
	ref, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile("../../packaging/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range yamlPaths(reflect.TypeOf(Config{}), "") {
		if !strings.Contains(string(ref), "`"+p+"`") {
			t.Errorf("docs/configuration.md does not document `%s`", p)
		}
		leaf := p[strings.LastIndex(p, ".")+1:]
		if !strings.Contains(string(tmpl), leaf+":") {
			t.Errorf("packaging/config.yaml does not mention %s", p)
		}
	}
	for _, p := range yamlPaths(reflect.TypeOf(detectspec.Detector{}), "") {
		if !strings.Contains(string(ref), "`"+p+"`") {
			t.Errorf("docs/configuration.md does not document detector key `%s`", p)
		}
	}
	for _, f := range RestartOnlyFields() {
		if !strings.Contains(string(ref), "`"+f+"`") {
			t.Errorf("restart-only field %s undocumented", f)
		}
	}
}

// The template, with its defaults commented out, is itself a valid config.
func TestTemplateIsValid(t *testing.T) {
	cfg, err := Load("../../packaging/config.yaml", true)
	if err != nil {
		t.Fatal(err)
	}
	cfg.NodeName = "n1"
	if err := Validate(&cfg, "template", nil); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.LockKey, Default().LockKey) {
		t.Error("template changed a default")
	}
}

// Every "#key: value" block of the template, uncommented, is exactly the
// built-in defaults: the template says so, and marks everything else as an
// example ("# Example …" lines, which stay comments).
func TestTemplateCommentedValuesAreTheDefaults(t *testing.T) {
	tmpl, err := os.ReadFile("../../packaging/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc strings.Builder
	inBlock := false
	for _, line := range strings.Split(string(tmpl), "\n") {
		top := len(line) > 1 && line[0] == '#' && line[1] != ' ' && line[1] != '#'
		inBlock = top || (inBlock && strings.HasPrefix(line, "#  "))
		if inBlock {
			doc.WriteString(line[1:] + "\n")
		}
	}
	got, err := Parse("template, uncommented", []byte(doc.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, doc.String())
	}
	// Compared as YAML: file origins aside, and an empty list is a nil one.
	gotYAML, err := yaml.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	wantYAML, err := yaml.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	if string(gotYAML) != string(wantYAML) {
		t.Errorf("the template's commented values are not the defaults:\n got:\n%s\nwant:\n%s", gotYAML, wantYAML)
	}
}
