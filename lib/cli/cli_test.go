package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/logging"
	"github.com/clusterrebootd/clusterrebootd/lib/version"
)

func newFS(out io.Writer) (*flag.FlagSet, *Common, *int) {
	fs := flag.NewFlagSet("crd-test", flag.ContinueOnError)
	fs.SetOutput(out)
	var c Common
	c.Register(fs)
	n := fs.Int("count", 1, "a number")
	return fs, &c, n
}

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		code     int
		wantOut  string // substring of what the flag set printed
		noOutput bool
		errHas   string
	}{
		{"ok", []string{"--count", "3"}, nil, 0, "", true, ""},
		{"unknown flag is one line, no usage dump", []string{"--bogus"}, nil, 2, "", true, "crd-test: unknown flag --bogus (see crd-test --help)"},
		{"unknown single-dash flag, --long spelling", []string{"-bogus"}, nil, 2, "", true, "crd-test: unknown flag --bogus (see crd-test --help)"},
		{"flag without its value", []string{"--count"}, nil, 2, "", true, "crd-test: flag --count needs a value (see crd-test --help)"},
		{"bad value", []string{"--count", "x"}, nil, 2, "", true, "invalid value \"x\" for flag --count"},
		{"help prints usage, exit 0", []string{"--help"}, nil, 0, "CRD_<FLAG>", false, ""},
		{"env sets a flag", nil, map[string]string{"CRD_COUNT": "7"}, 0, "", true, ""},
		{"bad env value", nil, map[string]string{"CRD_COUNT": "seven"}, 2, "", true, "CRD_COUNT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			fs, _, n := newFS(&out)
			err := Parse(fs, tt.args)
			if got := exitcode.From(err); got != tt.code {
				t.Fatalf("exit %d, want %d (err %v)", got, tt.code, err)
			}
			if tt.noOutput && out.Len() > 0 {
				t.Errorf("printed %q, want nothing", out.String())
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("output %q lacks %q", out.String(), tt.wantOut)
			}
			if tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)) {
				t.Errorf("error %v lacks %q", err, tt.errHas)
			}
			if tt.name == "env sets a flag" && (*n != 7 || !IsSet(fs, "count")) {
				t.Errorf("count = %d, set=%v", *n, IsSet(fs, "count"))
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "c.yaml")
	os.WriteFile(good, []byte("node_name: from-file\ncheck_interval_sec: 9\n"), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("windows:\n  deny: [\"Fry 18:00-Mon 08:00\"]\n"), 0o644)

	fs, c, _ := newFS(io.Discard)
	if err := Parse(fs, []string{"--config", good, "--node", "flag-node"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.Load(fs, func(cfg *config.Config) { cfg.CheckIntervalSec = 11 })
	if err != nil || cfg.NodeName != "flag-node" || cfg.CheckIntervalSec != 11 {
		t.Fatalf("flags must override the file: %+v %v", cfg.NodeName, err)
	}

	fs, c, _ = newFS(io.Discard)
	Parse(fs, []string{"--config", bad})
	_, err = c.Load(fs, nil)
	if exitcode.From(err) != 2 || !strings.Contains(err.Error(), "bad.yaml:2: windows.deny[0]") {
		t.Errorf("a bad window names file, line and field: %v", err)
	}

	fs, c, _ = newFS(io.Discard)
	Parse(fs, []string{"--config", filepath.Join(dir, "missing.yaml")})
	if _, err = c.Load(fs, nil); exitcode.From(err) != 2 {
		t.Errorf("an explicit missing config is exit 2: %v", err)
	}

	fs, c, _ = newFS(io.Discard)
	c.ConfigPath = filepath.Join(dir, "missing.yaml") // as if the default: not set on the command line
	cfg, err = c.Load(fs, nil)
	if err != nil || cfg.NodeName == "" {
		t.Errorf("a missing default config means defaults and the hostname: %v %q", err, cfg.NodeName)
	}
}

func TestExec(t *testing.T) {
	run := func(err error) RunFunc {
		return func(context.Context, []string, io.Reader, io.Writer, io.Writer) error { return err }
	}
	tests := []struct {
		name   string
		err    error
		code   int
		stderr string
	}{
		{"ok", nil, 0, ""},
		{"no is an answer, not an error", exitcode.Errorf(exitcode.No, "no reboot needed"), 1, ""},
		{"coded error printed once with the tool prefix", exitcode.Errorf(exitcode.LockBusy, "held by n2"), 4, "crd-x: held by n2\n"},
		{"prefix not doubled", exitcode.Errorf(exitcode.Config, "crd-x: bad"), 2, "crd-x: bad\n"},
		{"a subcommand's prefix names the tool", exitcode.Errorf(exitcode.Config, "crd-x run: bad flag"), 2, "crd-x run: bad flag\n"},
		{"uncoded is internal", errors.New("boom"), 70, "crd-x: boom\n"},
		{"the tool's library's prefix becomes the tool's", exitcode.Errorf(exitcode.HealthBlocked, "x: health script exited 1"), 3, "crd-x: health script exited 1\n"},
		{"another library's prefix stays", exitcode.Errorf(exitcode.HealthBlocked, "gate: health script exited 1"), 3, "crd-x: gate: health script exited 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got := Exec(context.Background(), "crd-x", run(tt.err), nil, nil, io.Discard, &stderr)
			if got != tt.code || stderr.String() != tt.stderr {
				t.Errorf("code %d stderr %q, want %d %q", got, stderr.String(), tt.code, tt.stderr)
			}
		})
	}
}

func TestLoggerAndOutput(t *testing.T) {
	c := Common{LogLevel: "info", LogFormat: "json"}
	if _, err := c.Logger(io.Discard, "x"); err != nil {
		t.Fatal(err)
	}
	c.LogFormat = "xml"
	if _, err := c.Logger(io.Discard, "x"); exitcode.From(err) != 2 {
		t.Errorf("bad log format: %v", err)
	}
	c.Format = "text"
	if f, err := c.Output(io.Discard); err != nil || f != "text" {
		t.Errorf("%v %v", f, err)
	}
}

// A value the flag package cannot parse gets a hint of its form: "parse
// error" alone does not say that 30 needs a unit.
func TestParseErrorHints(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--timeout", "30"}, "", `invalid value "30" for flag --timeout: parse error; a duration needs its unit, such as 30s`},
		{[]string{"--count", "x"}, "", "; use a whole number"},
		{[]string{"--dry-run=maybe"}, "", "; use true or false"},
		{nil, "CRD_TIMEOUT=30", `from environment variable "CRD_TIMEOUT": parse error; a duration needs its unit`},
	} {
		fs := flag.NewFlagSet("crd-x", flag.ContinueOnError)
		fs.Duration("timeout", time.Minute, "")
		fs.Int("count", 3, "")
		fs.Bool("dry-run", false, "")
		if tc.env != "" {
			k, v, _ := strings.Cut(tc.env, "=")
			t.Setenv(k, v)
		}
		err := Parse(fs, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) || exitcode.CodeOf(err) != exitcode.Config {
			t.Errorf("%v %s: %v, want %q", tc.args, tc.env, err, tc.want)
		}
	}
}

// A service's stderr is a logging.Journal only when JOURNAL_STREAM names it;
// its one-line error then carries priority err.
func TestServiceStderr(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stream"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	env := fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	if _, ok := ServiceStderr(env, f).(logging.Journal); !ok {
		t.Fatalf("JOURNAL_STREAM=%s names the file, yet no Journal", env)
	}
	if w := ServiceStderr("", f); w != io.Writer(f) {
		t.Errorf("without JOURNAL_STREAM: %T", w)
	}
	if w := ServiceStderr("1:1", f); w != io.Writer(f) {
		t.Errorf("another stream: %T", w)
	}
	var b bytes.Buffer
	run := func(context.Context, []string, io.Reader, io.Writer, io.Writer) error {
		return exitcode.Errorf(exitcode.Config, "bad")
	}
	Exec(context.Background(), "crd-x", run, nil, nil, io.Discard, logging.Journal{W: &b})
	if b.String() != "<3>crd-x: bad\n" {
		t.Errorf("error line under the journal %q, want <3>crd-x: bad", b.String())
	}
}

func TestParseRefusesEmptyValues(t *testing.T) {
	newSet := func() (*flag.FlagSet, *bool, *time.Duration, *string) {
		fs, _, _ := newFS(io.Discard)
		force := fs.Bool("force", false, "a switch")
		wait := fs.Duration("wait", time.Second, "a duration")
		var listed []string
		fs.Func("item", "a `value` of a list", func(s string) error { listed = append(listed, s); return nil })
		key := fs.String("key", "/default", "a `key`")
		return fs, force, wait, key
	}
	for _, tc := range []struct {
		name string
		args []string
		flag string
	}{
		{"a string flag", []string{"--key", ""}, "key"},
		{"a string flag with =", []string{"--key="}, "key"},
		{"blank is empty", []string{"--key", "  "}, "key"},
		{"a common flag", []string{"--node", ""}, "node"},
		{"the config file", []string{"--config="}, "config"},
		{"a number", []string{"--count", ""}, "count"},
		{"a duration", []string{"--wait="}, "wait"},
		{"a bool with =", []string{"--force="}, "force"},
		{"a Func flag", []string{"--item", ""}, "item"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, _, _, key := newSet()
			err := Parse(fs, tc.args)
			if exitcode.CodeOf(err) != exitcode.Config {
				t.Fatalf("Parse(%q) = %v, want exit 2", tc.args, err)
			}
			if want := "crd-test: --" + tc.flag + " is empty: an empty value is an error, never the default"; err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("Parse(%q) = %v, want %q", tc.args, err, want)
			}
			if *key != "/default" {
				t.Fatalf("--key became %q", *key)
			}
		})
	}
	t.Run("an empty CRD_ variable is no value", func(t *testing.T) {
		t.Setenv("CRD_KEY", "")
		fs, _, _, key := newSet()
		if err := Parse(fs, nil); err != nil || *key != "/default" {
			t.Fatalf("Parse = %v, key %q; want nil, /default", err, *key)
		}
	})
	t.Run("values and bare switches still parse, and help keeps its defaults", func(t *testing.T) {
		var out bytes.Buffer
		fs, force, wait, key := newSet()
		fs.SetOutput(&out)
		if err := Parse(fs, []string{"--force", "--wait", "2s", "--key", "/k", "--item", "x"}); err != nil {
			t.Fatal(err)
		}
		if !*force || *wait != 2*time.Second || *key != "/k" {
			t.Fatalf("force %v wait %s key %q", *force, *wait, *key)
		}
		if !IsSet(fs, "key") {
			t.Fatal("IsSet(key) = false")
		}
		fs, _, _, _ = newSet()
		fs.SetOutput(&out)
		_ = Parse(fs, []string{"--help"})
		if strings.Contains(out.String(), "(default false)") || !strings.Contains(out.String(), "(default /default)") {
			t.Fatalf("help changed:\n%s", out.String())
		}
	})
}

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want bool
	}{
		{"long", []string{"--version"}, true},
		{"short", []string{"-V"}, true},
		{"one dash long", []string{"-version"}, true},
		{"after a flag and its value", []string{"--config", "c.yaml", "-V"}, true},
		{"after a bool flag", []string{"--force", "--version"}, true},
		{"as a flag's value", []string{"--config", "-V"}, false},
		{"after an argument", []string{"status", "-V"}, false},
		{"after --", []string{"--", "-V"}, false},
		{"none", []string{"--force"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("crd-test sub", flag.ContinueOnError)
			var out strings.Builder
			fs.SetOutput(&out)
			fs.String("config", "", "configuration `file`")
			fs.Bool("force", false, "force")
			err := Parse(fs, tc.args)
			if got := errors.Is(err, ErrVersion); got != tc.want {
				t.Fatalf("Parse(%q) = %v, want the version: %v", tc.args, err, tc.want)
			}
			if !tc.want {
				return
			}
			if !errors.Is(err, flag.ErrHelp) || exitcode.CodeOf(err) != exitcode.OK {
				t.Errorf("err %v: want flag.ErrHelp and exit 0", err)
			}
			if want := version.Line("crd-test") + "\n"; out.String() != want {
				t.Errorf("printed %q, want %q", out.String(), want)
			}
		})
	}
}

func TestUsageLayout(t *testing.T) {
	fs := flag.NewFlagSet("crd-test", flag.ContinueOnError)
	var out strings.Builder
	fs.SetOutput(&out)
	var c Common
	c.Register(fs)
	fs.Bool("force", false, "force it")
	fs.Duration("wait", 0, "wait this `duration`")
	if err := Parse(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Parse(--help) = %v", err)
	}
	for _, want := range []string{
		"Usage: crd-test [flags]\n",
		"\n  --config FILE\n        configuration file; a missing default file means built-in defaults (default /etc/clusterrebootd/config.yaml)\n",
		"\n  --force\n        force it\n",
		"\n  --wait DURATION\n        wait this duration\n",
		"\n  -V, --version   the version\n",
		"\nSee man crd-test.\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "\n  -config") {
		t.Errorf("help has Go's one-dash spelling:\n%s", out.String())
	}
}

// SplitShared takes the shared flags off the front (cli.Dispatch moves
// them behind a subcommand's name); shared is how many arguments it took.
func TestSplitShared(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		shared int
	}{
		{"nothing", []string{}, 0},
		{"no flags", []string{"status", "--format", "json"}, 0},
		{"separate value", []string{"--config", "C", "status"}, 2},
		{"equals value", []string{"--format=json", "status", "x"}, 1},
		{"one dash", []string{"-config", "C", "-node=n", "status"}, 3},
		{"value looks like a subcommand", []string{"--config", "status", "release"}, 2},
		{"every shared flag", []string{"--config", "C", "--format", "json", "--node", "n", "--log-level", "debug", "--log-format", "json", "hold", "--", "true"}, 10},
		{"empty value", []string{"--config=", "status"}, 1},
		{"not a shared flag", []string{"--key", "K", "status"}, 0},
		{"shared then not shared", []string{"--config", "C", "--once", "status"}, 2},
		{"no subcommand", []string{"--config", "C"}, 2},
		{"missing value", []string{"status", "--config"}, 0},
		{"value missing at the end: left for the parser to report", []string{"--config"}, 0},
		{"double dash", []string{"--config", "C", "--", "status"}, 2},
		{"help flag", []string{"--config", "C", "--help"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shared, rest := SplitShared(tt.args)
			want, wantRest := tt.args[:tt.shared], tt.args[tt.shared:]
			if strings.Join(shared, "\x00") != strings.Join(want, "\x00") || strings.Join(rest, "\x00") != strings.Join(wantRest, "\x00") {
				t.Errorf("SplitShared(%q) = %q, %q; want %q, %q", tt.args, shared, rest, want, wantRest)
			}
		})
	}
}
