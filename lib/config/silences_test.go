package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestSilencesConfig(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		// where is the file line the first problem must name ("" when valid).
		where, err string
		urls       []string
	}{
		{"one URL", "silences:\n  alertmanager_url: http://127.0.0.1:9093\n  matchers:\n    - 'instance=~\"{{.Node}}(:[0-9]+)?\"'\n",
			"", "", []string{"http://127.0.0.1:9093"}},
		{"a list, path prefix, no port, credentials", "silences:\n  alertmanager_url:\n    - https://am-1.example.com/alertmanager\n    - http://u:secret@am-2:9093/\n  matchers: ['instance=\"{{.Node}}\"']\n",
			"", "", []string{"https://am-1.example.com/alertmanager", "http://u:secret@am-2:9093/"}},
		{"bad scheme, password masked", "silences:\n  alertmanager_url: ftp://u:secret@am:9093\n  matchers: ['instance=\"{{.Node}}\"']\n",
			":2", `"ftp://u:***@am:9093" is not an Alertmanager URL`, nil},
		{"query", "silences:\n  alertmanager_url: [http://am:9093, 'http://am:9093/?x=1']\n  matchers: ['instance=\"{{.Node}}\"']\n",
			":2", "silences.alertmanager_url[1]", nil},
		{"bad port", "silences:\n  alertmanager_url: http://am:99999\n  matchers: ['instance=\"{{.Node}}\"']\n",
			":2", "port", nil},
		{"twice", "silences:\n  alertmanager_url: [http://am:9093, http://am:9093/]\n  matchers: ['instance=\"{{.Node}}\"']\n",
			":2", "listed twice", nil},
		{"no matchers", "silences:\n  alertmanager_url: http://am:9093\n", ":1", "silences.matchers: is empty", nil},
		{"matchers without URL", "silences:\n  matchers: ['instance=\"{{.Node}}\"']\n", "", "silences.alertmanager_url: is empty while", nil},
		{"bad regex names its line", "silences:\n  alertmanager_url: http://am:9093\n  matchers:\n    - 'job=\"node\"'\n    - 'instance=~\"{{.Node}}(\"'\n",
			":5", "silences.matchers[1]: template \"instance=~\\\"{{.Node}}(\\\"\": \"instance=~\\\"node-1(\\\"\": the regex does not compile", nil},
		{"bad operator", "silences:\n  alertmanager_url: http://am:9093\n  matchers: ['instance<\"x\"']\n", ":3", "one of =, !=, =~ or !~", nil},
		{"unknown field", "silences:\n  alertmanager_url: http://am:9093\n  matchers: ['instance=\"{{.Host}}\"']\n", ":3", "unknown field .Host", nil},
		{"too wide", "silences:\n  alertmanager_url: http://am:9093\n  matchers: ['instance=~\".*\"']\n", ":3", "far too wide", nil},
		{"timeout", "silences:\n  alertmanager_url: http://am:9093\n  matchers: ['instance=\"{{.Node}}\"']\n  timeout_sec: 0\n", ":4", "silences.timeout_sec", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := load(t, tc.body)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual([]string(cfg.Silences.AlertmanagerURL), tc.urls) {
					t.Errorf("alertmanager_url = %q, want %q", cfg.Silences.AlertmanagerURL, tc.urls)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "config.yaml"+tc.where+": ") {
				t.Fatalf("err = %v\nwant one naming config.yaml%s and %q", err, tc.where, tc.err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the password is printed: %v", err)
			}
		})
	}
}

func TestSilencesCreatedBy(t *testing.T) {
	if got := (Silences{}).CreatedByFor("web-1"); got != "clusterrebootd@web-1" {
		t.Errorf("default created_by = %q", got)
	}
	if got := (Silences{CreatedBy: "ops"}).CreatedByFor("web-1"); got != "ops" {
		t.Errorf("created_by = %q", got)
	}
}

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://am:9093", "http://am:9093"},
		{"http://user:pw@am:9093/prefix", "http://user:***@am:9093/prefix"},
		{"https://u:p@ss@am/x", "https://u:***@am/x"},
		{"http://am:9093/path@with-at", "http://am:9093/path@with-at"},
		{"http://u:pw@am/a@b", "http://u:***@am/a@b"},
		{"http://u@am/x", "http://u@am/x"},
		{"not a url", "not a url"},
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
