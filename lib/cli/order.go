package cli

import (
	"flag"
	"io"
	"strings"
)

// SplitShared takes the shared flags (those Common.Register adds: --config,
// --format, --node, --log-level, --log-format) off the front of args, each
// as --flag VALUE or --flag=VALUE (one or two dashes), and returns them
// and the rest. It stops at the first argument that is not one of them,
// at "--", and at a shared flag whose value is missing, which then stays
// in rest for the subcommand's parser to report.
func SplitShared(args []string) (shared, rest []string) {
	names := sharedNames()
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "-" || a == "--" || !strings.HasPrefix(a, "-") {
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		isBool, shared := names[name]
		if !shared {
			break
		}
		if hasValue || isBool {
			i++
			continue
		}
		if i+1 >= len(args) {
			break
		}
		i += 2
	}
	return args[:i:i], args[i:]
}

// SharedFirst lets the shared flags come before a subcommand, as etcdctl,
// kubectl, git and systemctl let global flags: `TOOL --config C status
// --format json` becomes `TOOL status --config C --format json`. args
// that do not start with shared flags followed by a subcommand name come
// back unchanged, so a flag of one subcommand given before its name is
// still the error it was. The subcommand parses what is moved, so the
// empty-value check, CRD_* variables and the exit codes stay its own.
func SharedFirst(args []string) []string {
	shared, rest := SplitShared(args)
	if len(shared) == 0 || len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
		return args
	}
	out := make([]string, 0, len(args))
	out = append(out, rest[0])
	out = append(out, shared...)
	return append(out, rest[1:]...)
}

// sharedNames maps the names of the flags Common.Register adds to whether
// each is a bool flag (which takes no separate value), read from a
// throwaway FlagSet so that it follows Register.
func sharedNames() map[string]bool {
	fs := flag.NewFlagSet("shared", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c Common
	c.Register(fs)
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		b, ok := f.Value.(boolFlag)
		names[f.Name] = ok && b.IsBoolFlag()
	})
	return names
}
