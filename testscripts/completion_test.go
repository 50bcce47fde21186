package testscripts

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/clusterrebootd/clusterrebootd/cmd/tool/clusterrebootd"
	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crddetect"
	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crdgate"
	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crdlock"
	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crdreboot"
	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crdwindow"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
)

// trees are the command trees the tools run (and their completions read).
var trees = map[string]func() *ffcli.Command{
	"crd-detect":     func() *ffcli.Command { return crddetect.Tree(io.Discard, io.Discard) },
	"crd-window":     func() *ffcli.Command { return crdwindow.Tree(io.Discard, io.Discard) },
	"crd-gate":       func() *ffcli.Command { return crdgate.Tree(io.Discard, io.Discard) },
	"crd-reboot":     func() *ffcli.Command { return crdreboot.Tree(io.Discard, io.Discard) },
	"crd-lock":       func() *ffcli.Command { return crdlock.Tree(nil, io.Discard, io.Discard) },
	"clusterrebootd": func() *ffcli.Command { return clusterrebootd.Tree(nil, io.Discard, io.Discard) },
}

// TestCompletionsCoverTheTrees generates every tool's bash, zsh and fish
// completion and finds in it every command of the tool's tree, each of its
// flags under that command, and the fixed values of each flag that has
// them: a flag or subcommand added to a tree cannot be missing from the
// completions.
func TestCompletionsCoverTheTrees(t *testing.T) {
	if len(trees) != len(tools) {
		t.Fatalf("%d trees for %d tools", len(trees), len(tools))
	}
	for tool, tree := range trees {
		root := tree()
		if root.Name != tool {
			t.Fatalf("tree of %s is named %q", tool, root.Name)
		}
		for _, shell := range cli.Shells {
			t.Run(tool+"/"+shell, func(t *testing.T) {
				var out strings.Builder
				if err := cli.WriteCompletion(&out, root, shell); err != nil {
					t.Fatal(err)
				}
				script := out.String()
				cli.Walk(root, func(path []string, cmd *ffcli.Command) {
					key := strings.Join(path, " ")
					line := commandLine(script, shell, path)
					if line == "" {
						t.Errorf("%s %s: no entry in the %s completion", tool, key, shell)
						return
					}
					cmd.FlagSet.VisitAll(func(f *flag.Flag) {
						if !strings.Contains(line, flagWord(shell, f.Name)) {
							t.Errorf("%s %s --%s: not in the %s completion", tool, key, f.Name, shell)
						}
						if values := cli.ChoicesOf(f); values != nil && !strings.Contains(script, strings.Join(values, " ")) {
							t.Errorf("%s %s --%s: values %q not in the %s completion", tool, key, f.Name, values, shell)
						}
					})
				})
				if tool == "crd-lock" {
					for _, hidden := range []string{"step", "__guard-group", "acquire"} {
						if strings.Contains(script, hidden) {
							t.Errorf("internal command %q is in the %s completion", hidden, shell)
						}
					}
				}
			})
		}
	}
}

// commandLine returns what the script says about the command at path: the
// line of its case (bash, zsh), or every line of its condition (fish),
// whose subcommand offers must include path's last name.
func commandLine(script, shell string, path []string) string {
	key := strings.Join(path, " ")
	switch shell {
	case "bash":
		// Words: "--a --b" is --a and --b, each followed by a space.
		return strings.ReplaceAll(lineWithPrefix(script, "\t\""+key+"\") "), `"`, ` "`)
	case "zsh":
		// Arrays: (--a --b) is --a and --b, each followed by a space.
		return strings.ReplaceAll(lineWithPrefix(script, "\t'"+key+"') "), ")", " )")
	}
	cond := "__fish_use_subcommand"
	if len(path) > 0 {
		cond = "__fish_seen_subcommand_from " + path[len(path)-1]
		parentCond := "__fish_use_subcommand"
		if len(path) > 1 {
			parentCond = "__fish_seen_subcommand_from " + path[len(path)-2]
		}
		if !strings.Contains(script, "-n '"+parentCond) || !strings.Contains(script, " -a "+path[len(path)-1]+" ") {
			return ""
		}
	}
	var lines []string
	for _, l := range strings.Split(script, "\n") {
		if strings.Contains(l, "-n '"+cond) || strings.Contains(l, "-n 'true'") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func lineWithPrefix(script, prefix string) string {
	for _, l := range strings.Split(script, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l + " "
		}
	}
	return ""
}

func flagWord(shell, name string) string {
	if shell == "fish" {
		return " -l " + name + " "
	}
	return "--" + name + " "
}
