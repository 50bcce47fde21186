package crdreboot

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// No test reboots the machine: every command here is a script that
// records its call.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("node_name: node-a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(dir, "calls")
	fake := filepath.Join(dir, "fake-reboot")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"$*\" >> "+calls+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	disable := filepath.Join(dir, "disable")
	tests := []struct {
		name     string
		args     []string
		killSw   bool
		code     exitcode.Code
		stdout   string
		wantCall bool
	}{
		{"dry run text", []string{"--dry-run", "--format", "text"}, false, exitcode.OK, "dry run: node-a would run \"" + fake + " go\"", false},
		{"kill switch text", []string{"--format", "text"}, true, exitcode.KillSwitch, "kill switch: node-a does not reboot: present\n", false},
		{"reboot text", []string{"--format", "text"}, false, exitcode.OK, "reboot requested: node-a ran \"" + fake + " go\"", true},
		{"unwritable state dir", []string{"--format", "text", "--state-dir", filepath.Join(cfg, "state")}, false, exitcode.RebootFailed, "error: reboot: cannot write reboot marker", false},
		{"bad flag", []string{"--nope"}, false, exitcode.Config, `"exit_name":"config"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_ = os.Remove(calls)
			_ = os.Remove(disable)
			if tt.killSw {
				if err := os.WriteFile(disable, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{"--config", cfg, "--state-dir", filepath.Join(dir, "state"), "--kill-switch-file", disable}, tt.args...)
			args = append(args, "--", fake, "go")
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), args, nil, &stdout, &stderr)
			if got := exitcode.CodeOf(err); got != tt.code {
				t.Fatalf("code %v (%v), want %v; stderr:\n%s", got, err, tt.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.stdout, stdout.String())
			}
			_, statErr := os.Stat(calls)
			if called := statErr == nil; called != tt.wantCall {
				t.Errorf("command called: %v, want %v", called, tt.wantCall)
			}
		})
	}
}
