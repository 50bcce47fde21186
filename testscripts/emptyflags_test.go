package testscripts

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// TestEveryFlagRefusesAnEmptyValue gives every flag of every tool and
// subcommand, as its --help lists them, an empty value: each must be exit 2
// naming the flag, never the default (`crd-lock hold --key "$UNSET"` took
// the fleet's reboot lock; `release --holder ""` meant this node).
func TestEveryFlagRefusesAnEmptyValue(t *testing.T) {
	subcommands := map[string][]string{
		"crd-detect":     {""},
		"crd-window":     {""},
		"crd-gate":       {""},
		"crd-reboot":     {""},
		"crd-lock":       {"hold", "status", "release", "complete"},
		"clusterrebootd": {"run", "simulate", "status", "validate-config", "version", "pause", "resume"},
	}
	flagLine := regexp.MustCompile(`(?m)^  --([a-z][a-z0-9-]*)`)
	for name, subs := range subcommands {
		for _, sub := range subs {
			var prefix []string
			if sub != "" {
				prefix = []string{sub}
			}
			var help bytes.Buffer
			_ = tools[name](context.Background(), append(prefix, "--help"), nil, &help, new(bytes.Buffer))
			flags := flagLine.FindAllStringSubmatch(help.String(), -1)
			if len(flags) < 5 {
				t.Fatalf("%s %s --help lists %d flags, want at least the common ones:\n%s", name, sub, len(flags), help.String())
			}
			for _, m := range flags {
				flagName := m[1]
				t.Run(strings.TrimSpace(name+" "+sub)+" --"+flagName, func(t *testing.T) {
					args := append(append([]string{}, prefix...), "--"+flagName+"=")
					if name == "crd-lock" && sub == "hold" {
						args = append(args, "--", "true")
					}
					var stdout, stderr bytes.Buffer
					err := tools[name](context.Background(), args, strings.NewReader(""), &stdout, &stderr)
					if got := exitcode.CodeOf(err); got != exitcode.Config {
						t.Fatalf("%s %q: exit %d (%v), want 2", name, args, got, err)
					}
					if want := "--" + flagName + " is empty"; !strings.Contains(err.Error(), want) || !strings.Contains(stdout.String(), want) {
						t.Fatalf("%s %q: error %q, stdout %q: want both to say %q", name, args, err, stdout.String(), want)
					}
				})
			}
		}
	}
}
