package testscripts

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// TestEveryFlagRefusesAnEmptyValue gives every flag of every tool and
// subcommand, as its --help lists them, an empty value: each must be exit 2
// naming the flag, never the default (`crd-lock hold --key "$UNSET"` took
// the fleet's reboot lock; `release --holder ""` meant this node). The
// commands come from each tool's command tree, so a new subcommand is
// covered without editing this test.
func TestEveryFlagRefusesAnEmptyValue(t *testing.T) {
	subcommands := map[string][][]string{}
	for name, tree := range trees {
		cli.Walk(tree(), func(path []string, cmd *ffcli.Command) {
			if len(path) > 0 && path[len(path)-1] == "help" {
				return // takes no flags but --help
			}
			if len(cmd.Subcommands) > 0 && (len(path) > 0 || name == "crd-lock") {
				return // a group (crd-lock, crd-lock serve) runs nothing: its leaves are walked
			}
			subcommands[name] = append(subcommands[name], append([]string(nil), path...))
		})
	}
	if n := len(subcommands["crd-lock"]) + len(subcommands["clusterrebootd"]); n < 15 {
		t.Fatalf("only %d subcommands of crd-lock and clusterrebootd found in the trees: %v", n, subcommands)
	}
	flagLine := regexp.MustCompile(`(?m)^  --([a-z][a-z0-9-]*)`)
	for name, subs := range subcommands {
		for _, prefix := range subs {
			sub := strings.Join(prefix, " ")
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
