// Package cli is the plumbing every crd-* tool and clusterrebootd share:
// the common flags (parsed with ff, each also settable as a CRD_* environment
// variable), loading the configuration, building the logger, choosing the
// output format, and turning a Run function's error into an exit status.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/logging"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
	"github.com/clusterrebootd/clusterrebootd/lib/version"
	"github.com/clusterrebootd/clusterrebootd/lib/window"
)

// EnvPrefix is the prefix of the environment variables that set flags:
// --health-timeout is also CRD_HEALTH_TIMEOUT.
const EnvPrefix = "CRD"

// RunFunc is the one signature of every tool's entry point.
type RunFunc func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error

// Common holds the flags every tool takes.
type Common struct {
	ConfigPath string
	Format     string
	Node       string
	LogLevel   string
	LogFormat  string
}

// Register adds --config, --format, --node, --log-level and --log-format.
func (c *Common) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.ConfigPath, "config", config.DefaultPath, "configuration `file`; a missing default file means built-in defaults")
	fs.StringVar(&c.Format, "format", "", "output `format`: json (default when stdout is not a terminal) or text")
	fs.StringVar(&c.Node, "node", "", "node `name` (overrides node_name; default the hostname)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log `format` on stderr: text (key=value) or json")
	Choices(fs, "format", string(report.JSON), string(report.Text))
	Choices(fs, "log-level", "debug", "info", "warn", "error")
	Choices(fs, "log-format", "text", "json")
}

// Parse parses args (and CRD_* environment variables) into fs. A usage error
// carries exit code 2; -h/--help returns flag.ErrHelp (exit 0) after usage is
// printed to fs.Output().
//
// --version and -V (before any argument that is not a flag) print
// version.Line of the program to fs.Output() and return an error that is
// flag.ErrHelp too (exit 0). They are not flags: no CRD_VERSION variable
// can set them.
func Parse(fs *flag.FlagSet, args []string) error {
	return ParseSynopsis(fs, args, fs.Name()+" [flags]")
}

// ParseSynopsis is Parse with the first line of --help given: a tool that
// takes arguments besides flags names them ("crd-lock hold [flags] --
// COMMAND [ARG...]").
func ParseSynopsis(fs *flag.FlagSet, args []string, synopsis string) error {
	if askedVersion(fs, args) {
		program, _, _ := strings.Cut(fs.Name(), " ")
		fmt.Fprintln(fs.Output(), version.Line(program))
		return ErrVersion
	}
	// The flag package prints the error and the whole usage on a bad flag;
	// we want one line naming the problem, and the usage only on --help.
	out := fs.Output()
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	empty := refuseEmpty(fs)
	err := ff.Parse(fs, args, ff.WithEnvVarPrefix(EnvPrefix))
	restore(fs)
	fs.SetOutput(out)
	fs.Usage = func() { Usage(fs.Output(), fs, synopsis) }
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return err
	}
	if err != nil && *empty != "" {
		return exitcode.Errorf(exitcode.Config, "%s: --%s is empty: an empty value is an error, never the default (an unset shell variable?); leave the flag out to get its default (see %s --help)", fs.Name(), *empty, fs.Name())
	}
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "error parsing commandline arguments: ")
		return exitcode.Errorf(exitcode.Config, "%s: %s%s (see %s --help)", fs.Name(), longSpelling(msg), valueHint(fs, msg), fs.Name())
	}
	return nil
}

// refuseEmpty makes every flag of fs refuse an empty value while it is
// parsed: `crd-lock hold --key "$UNSET"` must not take the default key, nor
// `--holder ""` mean this node. The name of the flag given "" ends up in
// the returned string. An empty CRD_* variable is no value at all (ff skips
// it), as an unset one. restore undoes it.
func refuseEmpty(fs *flag.FlagSet) *string {
	empty := new(string)
	fs.VisitAll(func(f *flag.Flag) {
		v := nonEmpty{Value: f.Value, name: f.Name, empty: empty}
		if b, ok := f.Value.(boolFlag); ok && b.IsBoolFlag() {
			f.Value = nonEmptyBool{v}
		} else {
			f.Value = v
		}
	})
	return empty
}

// restore puts back the values refuseEmpty wrapped, so that the flag
// package's help (which compares defaults with its Value type's zero value)
// sees the original types.
func restore(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		switch v := f.Value.(type) {
		case nonEmpty:
			f.Value = v.Value
		case nonEmptyBool:
			f.Value = v.Value
		}
	})
}

type boolFlag interface{ IsBoolFlag() bool }

// nonEmpty is a flag.Value that refuses "".
type nonEmpty struct {
	flag.Value
	name  string
	empty *string
}

var errEmpty = errors.New("empty value")

func (v nonEmpty) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		*v.empty = v.name
		return errEmpty
	}
	return v.Value.Set(s)
}

// nonEmptyBool keeps a bool flag usable without a value (--force).
type nonEmptyBool struct{ nonEmpty }

func (v nonEmptyBool) IsBoolFlag() bool { return true }

// longSpelling puts the flag a message of the flag package names in the
// --long spelling of the help and the man pages: "flag provided but not
// defined: -bogus" is "unknown flag --bogus".
func longSpelling(msg string) string {
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + strings.TrimPrefix(name, "-")
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "flag --" + strings.TrimPrefix(name, "-") + " needs a value"
	}
	for _, pre := range []string{"for flag -", "for -"} {
		if before, after, ok := strings.Cut(msg, pre); ok && !strings.HasPrefix(after, "-") {
			return before + strings.TrimSuffix(pre, "-") + "--" + after
		}
	}
	return msg
}

// valueHint says what a flag's value should look like when the flag
// package's "parse error" does not: "invalid value "30" for flag -timeout:
// parse error" is a duration without its unit.
func valueHint(fs *flag.FlagSet, msg string) string {
	var name string
	for _, pre := range []string{"for flag -", "for -", `from environment variable "`} {
		if _, rest, ok := strings.Cut(msg, pre); ok {
			name, _, _ = strings.Cut(rest, ":")
			name = strings.TrimSuffix(name, `"`)
			break
		}
	}
	if strings.HasPrefix(name, EnvPrefix+"_") {
		name = strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, EnvPrefix+"_")), "_", "-")
	}
	f := fs.Lookup(name)
	if f == nil {
		return ""
	}
	switch f.Value.(type) {
	case interface{ IsBoolFlag() bool }:
		return "; use true or false"
	}
	if _, err := time.ParseDuration(f.DefValue); err == nil && strings.ContainsAny(f.DefValue, "hms") {
		return "; a duration needs its unit, such as 30s, 10m or 1h"
	}
	if _, err := strconv.Atoi(f.DefValue); err == nil {
		return "; use a whole number"
	}
	return ""
}

// ErrVersion is what Parse returns after printing the version for
// --version or -V; errors.Is(ErrVersion, flag.ErrHelp) holds, so every
// caller that ends quietly with exit 0 after --help does so after
// --version too.
var ErrVersion error = versionShown{}

type versionShown struct{}

func (versionShown) Error() string        { return "version shown" }
func (versionShown) Is(target error) bool { return target == flag.ErrHelp }

// askedVersion reports whether args hold --version or -V (one or two
// dashes) among the flags, before "--" or the first argument that is not
// a flag or a flag's value.
func askedVersion(fs *flag.FlagSet, args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			return false
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if name == "version" || name == "V" {
			return true
		}
		f := fs.Lookup(name)
		if f == nil || hasValue {
			continue
		}
		if b, ok := f.Value.(boolFlag); !ok || !b.IsBoolFlag() {
			i++ // the flag's value
		}
	}
	return false
}

// Usage prints the help of fs in the layout every tool shares: the
// synopsis, then each flag with its --long spelling, value name, meaning
// and default, then where the rest is documented.
func Usage(w io.Writer, fs *flag.FlagSet, synopsis string) {
	program, _, _ := strings.Cut(fs.Name(), " ")
	fmt.Fprintf(w, "Usage: %s\n\n", synopsis)
	fmt.Fprintf(w, "Flags (each is also the environment variable %s_<FLAG>, such as %s_CONFIG for --config):\n", EnvPrefix, EnvPrefix)
	PrintFlags(w, fs)
	fmt.Fprintf(w, "\n  -h, --help      this help\n  -V, --version   the version\n\nSee man %s.\n", program)
}

// PrintFlags lists the flags of fs, each as "  --name VALUE" and its
// meaning on the next line, with the default when it is not the zero value.
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		value, meaning := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if value != "" {
			line += " " + strings.ToUpper(value)
		}
		fmt.Fprintln(w, line)
		if !zeroDefault(f.DefValue) {
			meaning += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "        %s\n", strings.ReplaceAll(meaning, "\n", "\n        "))
	})
}

func zeroDefault(v string) bool {
	switch v {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

// IsSet reports whether the flag name was given on the command line or through
// its environment variable.
func IsSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// Load reads the configuration named by --config (built-in defaults when the
// default path does not exist; an explicit --config that is missing is an
// error), merges config.d drop-ins, applies --node, then override (the tool's
// own flags), fills node_name from the hostname, and validates. Any problem is
// exit code 2.
func (c *Common) Load(fs *flag.FlagSet, override func(*config.Config)) (config.Config, error) {
	explicit := IsSet(fs, "config")
	cfg, err := config.Load(c.ConfigPath, explicit)
	var schema *config.ValidationError
	if err != nil && !errors.As(err, &schema) {
		return cfg, err
	}
	// A file that does not fit the schema is still checked against the
	// rules: Validate lists its schema problems first, then the rest.
	file := cfg
	if c.Node != "" {
		cfg.NodeName = c.Node
	}
	if override != nil {
		override(&cfg)
	}
	if cfg.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return cfg, exitcode.Errorf(exitcode.Config, "node_name is empty and the hostname is unknown (%v): set node_name in %s or pass --node", err, c.ConfigPath)
		}
		cfg.NodeName = h
	}
	if err := config.Validate(&cfg, c.ConfigPath, window.Validate); err != nil {
		return cfg, blameFlags(err, &file, c.ConfigPath)
	}
	return cfg, nil
}

// blameFlags marks the problems that the file alone does not have: a flag
// or a CRD_* variable set that value, and the message says so instead of
// naming a file (which may not even exist).
func blameFlags(err error, file *config.Config, path string) error {
	var ve *config.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	inFile := map[string]bool{}
	var fe *config.ValidationError
	if errors.As(config.Validate(file, path, window.Validate), &fe) {
		for _, p := range fe.Problems {
			inFile[p.Field+"\x00"+p.Message] = true
		}
	}
	for i, p := range ve.Problems {
		if !inFile[p.Field+"\x00"+p.Message] {
			ve.Problems[i].Where = config.FromFlags
		}
	}
	return err
}

// Output resolves --format (extra lists tool-specific formats).
func (c *Common) Output(stdout io.Writer, extra ...report.Format) (report.Format, error) {
	return report.ParseFormat(c.Format, stdout, extra...)
}

// Logger builds the stderr logger for tool, scoped with component=tool.
func (c *Common) Logger(stderr io.Writer, tool string) (*slog.Logger, error) {
	return logging.New(stderr, tool, c.LogLevel, c.LogFormat)
}

// Exec runs a tool and returns its exit status. On failure it prints one line
// "tool: reason" to stderr, except for exit code 1 (a plain "no", such as "no
// reboot needed"), which is an answer, not an error.
func Exec(ctx context.Context, tool string, run RunFunc, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdin, stdout, stderr)
	code := exitcode.CodeOf(err)
	var q quiet
	if err != nil && code != exitcode.OK && code != exitcode.No && !errors.As(err, &q) {
		// One line, whatever a value in it (a kill switch's reason) holds.
		msg := report.OneLine(err.Error())
		msg = prefixed(tool, msg)
		if _, ok := stderr.(logging.Journal); ok {
			msg = "<3>" + msg // journald: priority err
		}
		fmt.Fprintln(stderr, msg)
	}
	return int(code)
}

// prefixed names the tool once at the start of msg: "crd-lock: …" and
// "clusterrebootd run: …" already name it, and the prefix of the tool's own
// library ("gate: " from crd-gate's lib/gate) becomes the tool's
// ("crd-gate: gate: …" said it twice).
func prefixed(tool, msg string) string {
	if strings.HasPrefix(msg, tool+":") || strings.HasPrefix(msg, tool+" ") {
		return msg
	}
	if lib, ok := strings.CutPrefix(tool, "crd-"); ok {
		if rest, ok := strings.CutPrefix(msg, lib+": "); ok {
			msg = rest
		}
	}
	return tool + ": " + msg
}

// quiet marks an error that was already reported in the form the caller
// reads (see Quiet).
type quiet struct{ error }

func (q quiet) Unwrap() error { return q.error }

// Quiet marks err as reported already, so that Exec does not print its
// one-line message on stderr; its exit code is unchanged. For crd-lock's
// `step` commands: their reader is the daemon, which gets the error in the
// JSON object on stdout, and their stderr carries JSON log lines only.
func Quiet(err error) error {
	if err == nil {
		return nil
	}
	return quiet{err}
}

// Settler is a tool's result: its header settles from the run's error.
type Settler = report.Settler

// Emit prints a tool's one result object in the --format asked for (JSON
// when --format itself is bad, which then is the error) and returns err
// (report.Finish).
func Emit(stdout io.Writer, c *Common, res Settler, err error) error {
	format, ferr := c.Output(stdout)
	if ferr != nil {
		format = report.JSON
		if err == nil {
			err = ferr
		}
	}
	return report.Finish(stdout, format, res, err)
}
