package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/window"
)

// FuzzLoad feeds the loader a main file and one drop-in. Whatever the bytes,
// it must not panic or hang, and every error is exit 2 on one line; a
// schema problem names a field and the file:line of one of the two files.
// What it accepts and validates must load again, unchanged, from a copy
// that leaves the drop-in in place (a second load is the daemon's reload).
// make fuzz-config runs it; plain `go test` runs the seeds below.
func FuzzLoad(f *testing.F) {
	for _, seed := range [][2]string{
		{"node_name: a\n", ""},
		{"node_name: a\nmax_holders: 2\n", "max_holders: 3\n"},
		{"---\n# managed\n---\nwindows:\n  deny: [\"* 00:00-24:00\"]\n", ""},
		{"node_name: a\n", "---\nwindows: {deny: [\"Fri 18:00-Mon 08:00\"]}\n"},
		{"max_holders: 2.9\nlock_ttl_sec: 30.5\ndry_run: \"yes\"\n", "lock_tll_sec: 30\n"},
		{"reboot_required_detectors:\n  - {type: command, cmd: [/bin/x], success_exit_codes: [1]}\n", "reboot_required_detectors: []\n"},
		{"a: &a [*a]\n", ""},
		{"x: &x {<<: *x}\n", "dry_run: *y\n"},
		{"metrics: {<<: {enabled: \"on\"}}\n", "windows: [1, 2]\n"},
		{"node_name: \xff\n", "\t- bad"},
		{"pre_reboot_hooks: [{cmd: [/bin/drain], timeout_sec: 1e3}]\n", "{"},
		{"", "~"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, main, dropin string) {
		dir := t.TempDir()
		p := filepath.Join(dir, "config.yaml")
		d := filepath.Join(dir, "config.d", "50-x.yaml")
		if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(main), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(d, []byte(dropin), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(p, true)
		if err == nil {
			if cfg.NodeName == "" {
				cfg.NodeName = "node-1"
			}
			err = Validate(&cfg, p, window.Validate)
		}
		if err == nil {
			again, aerr := Load(p, true)
			if aerr != nil || again.MaxHolders != cfg.MaxHolders || again.DryRun != cfg.DryRun ||
				strings.Join(again.Windows.Deny, "\x00") != strings.Join(cfg.Windows.Deny, "\x00") {
				t.Fatalf("a second load differs: %v", aerr)
			}
			return
		}
		if exitcode.From(err) != 2 {
			t.Fatalf("exit %d for %q", exitcode.From(err), err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("error is not one line: %q", err)
		}
		var ve *ValidationError
		if !errors.As(err, &ve) {
			return
		}
		for _, pr := range ve.Problems {
			if pr.Message == "" {
				t.Fatalf("problem without a message: %+v", pr)
			}
			if pr.Where != "" && !strings.HasPrefix(pr.Where, p+":") && !strings.HasPrefix(pr.Where, d+":") {
				t.Fatalf("problem %+v names neither file", pr)
			}
		}
	})
}
