package cli

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Shells are the shells WriteCompletion writes a script for.
var Shells = []string{"bash", "zsh", "fish"}

// WriteCompletion writes the completion script for shell (bash, zsh or
// fish) of root's command tree: its subcommands, each command's flags in
// the --long spelling, and the values of the flags that have a fixed set
// (Choices). Nothing in it is written by hand per tool: a flag added to a
// command's FlagSet is in the next script.
func WriteCompletion(w io.Writer, root *ffcli.Command, shell string) error {
	nodes := completionNodes(root)
	switch shell {
	case "bash":
		return writeBash(w, root.Name, nodes)
	case "zsh":
		return writeZsh(w, root.Name, nodes)
	case "fish":
		return writeFish(w, root.Name, nodes)
	}
	return exitcode.Errorf(exitcode.Config, "%s: --completion %q: use bash, zsh or fish (see man %s, COMPLETION)", root.Name, shell, root.Name)
}

// completionNode is one command of the tree as the scripts see it.
type completionNode struct {
	path  []string // names below the root
	cmd   *ffcli.Command
	subs  []string
	flags []*flag.Flag
}

func (n completionNode) key() string { return strings.Join(n.path, " ") }

func completionNodes(root *ffcli.Command) []completionNode {
	var nodes []completionNode
	Walk(root, func(path []string, cmd *ffcli.Command) {
		n := completionNode{path: path, cmd: cmd}
		for _, sub := range cmd.Subcommands {
			n.subs = append(n.subs, sub.Name)
		}
		if cmd.FlagSet != nil {
			cmd.FlagSet.VisitAll(func(f *flag.Flag) { n.flags = append(n.flags, f) })
		}
		sort.Slice(n.flags, func(i, j int) bool { return n.flags[i].Name < n.flags[j].Name })
		nodes = append(nodes, n)
	})
	return nodes
}

// funcName is the shell function of tool: crd-lock → _crd_lock.
func funcName(tool string) string { return "_" + strings.ReplaceAll(tool, "-", "_") }

func flagWords(flags []*flag.Flag, valueOnly bool) string {
	var out []string
	for _, f := range flags {
		if !valueOnly || takesValue(f) {
			out = append(out, "--"+f.Name)
		}
	}
	return strings.Join(out, " ")
}

// shortUsage is the first line of a flag's meaning, without the
// backquotes that name its value, for fish's descriptions.
func shortUsage(f *flag.Flag) string {
	_, usage := flag.UnquoteUsage(f)
	usage, _, _ = strings.Cut(usage, "\n")
	return usage
}

func writeBash(w io.Writer, tool string, nodes []completionNode) error {
	fn := funcName(tool)
	var b strings.Builder
	fmt.Fprintf(&b, "# bash completion for %s, generated from its command tree by `%s --completion bash`.\n\n", tool, tool)
	fmt.Fprintf(&b, "# %s_cmd PATH: the subcommands, flags and flags taking a value of PATH.\n", fn)
	fmt.Fprintf(&b, "%s_cmd() {\n\tcase \"$1\" in\n", fn)
	for _, n := range nodes {
		fmt.Fprintf(&b, "\t%q) subs=%q flags=%q vflags=%q ;;\n", n.key(), strings.Join(n.subs, " "),
			flagWords(n.flags, false), " "+flagWords(n.flags, true)+" ")
	}
	b.WriteString("\tesac\n}\n\n")
	fmt.Fprintf(&b, "# %s_values PATH FLAG: the values of FLAG when it has a fixed set.\n", fn)
	fmt.Fprintf(&b, "%s_values() {\n\tcase \"$1|$2\" in\n", fn)
	for _, n := range nodes {
		for _, f := range n.flags {
			if c := ChoicesOf(f); c != nil {
				fmt.Fprintf(&b, "\t%q) echo %q ;;\n", n.key()+"|--"+f.Name, strings.Join(c, " "))
			}
		}
	}
	b.WriteString("\t*) return 1 ;;\n\tesac\n}\n\n")
	fmt.Fprintf(&b, `%[1]s() {
	local cur="${COMP_WORDS[COMP_CWORD]}" cmdpath="" subs="" flags="" vflags="" w flag values i=1
	COMPREPLY=()
	%[1]s_cmd ""
	while ((i < COMP_CWORD)); do
		w="${COMP_WORDS[i]}"
		if [[ $w == -- ]]; then
			# COMMAND and its arguments follow (crd-lock hold -- COMMAND).
			COMPREPLY=($(compgen -c -- "$cur"))
			return 0
		elif [[ $w == -* ]]; then
			if [[ $w != *=* && $vflags == *" $w "* ]]; then
				((i += 1))
				[[ ${COMP_WORDS[i]} == = ]] && ((i += 1))
			fi
		elif [[ " $subs " == *" $w "* ]]; then
			cmdpath="${cmdpath:+$cmdpath }$w"
			%[1]s_cmd "$cmdpath"
		fi
		((i += 1))
	done
	# The value of a flag: --format json, --format=json (bash splits at =).
	flag=""
	if [[ $cur == --*=* ]]; then
		flag="${cur%%%%=*}" cur="${cur#*=}"
	elif ((COMP_CWORD >= 2)) && [[ ${COMP_WORDS[COMP_CWORD-1]} == = ]]; then
		flag="${COMP_WORDS[COMP_CWORD-2]}"
	elif ((COMP_CWORD >= 1)) && [[ $vflags == *" ${COMP_WORDS[COMP_CWORD-1]} "* ]]; then
		flag="${COMP_WORDS[COMP_CWORD-1]}"
	fi
	if [[ -n $flag ]]; then
		if values="$(%[1]s_values "$cmdpath" "$flag")"; then
			COMPREPLY=($(compgen -W "$values" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi
		return 0
	fi
	if [[ $cur == -* || -z $subs ]]; then
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
	else
		COMPREPLY=($(compgen -W "$subs" -- "$cur"))
	fi
	return 0
}
complete -o default -F %[1]s %[2]s
`, fn, tool)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeZsh(w io.Writer, tool string, nodes []completionNode) error {
	fn := funcName(tool)
	var b strings.Builder
	fmt.Fprintf(&b, "#compdef %s\n# zsh completion for %s, generated from its command tree by `%s --completion zsh`.\n\n", tool, tool, tool)
	fmt.Fprintf(&b, "%s_cmd() {\n\tcase \"$1\" in\n", fn)
	for _, n := range nodes {
		fmt.Fprintf(&b, "\t%s) subs=(%s) flags=(%s) vflags=(%s) ;;\n", zshQuote(n.key()), strings.Join(n.subs, " "),
			flagWords(n.flags, false), flagWords(n.flags, true))
	}
	b.WriteString("\tesac\n}\n\n")
	fmt.Fprintf(&b, "%s_values() {\n\tcase \"$1|$2\" in\n", fn)
	for _, n := range nodes {
		for _, f := range n.flags {
			if c := ChoicesOf(f); c != nil {
				fmt.Fprintf(&b, "\t%s) values=(%s) ;;\n", zshQuote(n.key()+"|--"+f.Name), strings.Join(c, " "))
			}
		}
	}
	b.WriteString("\t*) return 1 ;;\n\tesac\n}\n\n")
	fmt.Fprintf(&b, `%[1]s() {
	local cmdpath="" w flag i=2
	local -a subs flags vflags values
	%[1]s_cmd ""
	while (( i < CURRENT )); do
		w=${words[i]}
		if [[ $w == -- ]]; then
			_command_names -e
			return
		elif [[ $w == -* ]]; then
			if [[ $w != *=* ]] && (( ${vflags[(Ie)$w]} )); then
				(( i += 1 ))
			fi
		elif (( ${subs[(Ie)$w]} )); then
			cmdpath="${cmdpath:+$cmdpath }$w"
			%[1]s_cmd "$cmdpath"
		fi
		(( i += 1 ))
	done
	flag=""
	if [[ $PREFIX == --*=* ]]; then
		flag=${PREFIX%%%%=*}
		compset -P '*='
	elif (( CURRENT > 2 )) && (( ${vflags[(Ie)${words[CURRENT-1]}]} )); then
		flag=${words[CURRENT-1]}
	fi
	if [[ -n $flag ]]; then
		if %[1]s_values "$cmdpath" "$flag"; then
			compadd -a values
		else
			_files
		fi
	elif [[ $PREFIX == -* ]] || (( ${#subs} == 0 )); then
		compadd -a flags
	else
		compadd -a subs
	fi
}

%[1]s "$@"
`, fn)
	_, err := io.WriteString(w, b.String())
	return err
}

// zshQuote single-quotes s for a case pattern (” for the root).
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func writeFish(w io.Writer, tool string, nodes []completionNode) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# fish completion for %s, generated from its command tree by `%s --completion fish`.\n", tool, tool)
	fmt.Fprintf(&b, "complete -c %s -f\n", tool)
	for _, n := range nodes {
		cond := "__fish_use_subcommand"
		if len(n.path) > 0 {
			cond = "__fish_seen_subcommand_from " + n.path[len(n.path)-1]
			for _, sub := range n.subs {
				cond += "; and not __fish_seen_subcommand_from " + sub
			}
		} else if len(n.subs) == 0 {
			cond = "true"
		}
		for _, sub := range n.subs {
			desc := ""
			if s := Subcommand(n.cmd, sub); s != nil {
				desc = s.ShortHelp
			}
			fmt.Fprintf(&b, "complete -c %s -n %s -a %s -d %s\n", tool, fishQuote(cond), sub, fishQuote(desc))
		}
		for _, f := range n.flags {
			opts := ""
			switch c := ChoicesOf(f); {
			case c != nil:
				opts = " -x -a " + fishQuote(strings.Join(c, " "))
			case takesValue(f):
				opts = " -r -F"
			}
			fmt.Fprintf(&b, "complete -c %s -n %s -l %s%s -d %s\n", tool, fishQuote(cond), f.Name, opts, fishQuote(shortUsage(f)))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fishQuote single-quotes s for fish (which takes \' and \\ inside).
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
