package reboot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKillSwitch(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string) string
		set     bool
		reason  string // exact, or prefix when it ends in "*"
		wantErr bool
	}{
		{"no path configured", func(t *testing.T, dir string) string { return "" }, false, "", false},
		{"absent", func(t *testing.T, dir string) string { return filepath.Join(dir, "disable") }, false, "", false},
		{"present and empty", func(t *testing.T, dir string) string {
			return writeFile(t, dir, "disable", "")
		}, true, "present", false},
		{"present with a reason", func(t *testing.T, dir string) string {
			return writeFile(t, dir, "disable", "  change freeze until Monday (JIRA-42)  \nsecond line\n")
		}, true, "change freeze until Monday (JIRA-42)", false},
		{"reason without newline", func(t *testing.T, dir string) string {
			return writeFile(t, dir, "disable", "incident 7")
		}, true, "incident 7", false},
		{"long reason is shortened", func(t *testing.T, dir string) string {
			return writeFile(t, dir, "disable", strings.Repeat("r", 5000))
		}, true, strings.Repeat("r", 200) + "...", false},
		{"a directory counts as present", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "disable")
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			return p
		}, true, "present", false},
		{"a symlink loop counts as present", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "disable")
			if err := os.Symlink(p, p); err != nil {
				t.Fatal(err)
			}
			return p
		}, true, "present (a symlink whose target cannot be read: *", false},
		{"a dangling symlink counts as present", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "disable")
			if err := os.Symlink(filepath.Join(dir, "freeze-reasn"), p); err != nil {
				t.Fatal(err)
			}
			return p
		}, true, "present (a symlink whose target cannot be read: no such file or directory)", false},
		{"a symlink to a reason file gives its reason", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "disable")
			if err := os.Symlink(writeFile(t, dir, "freeze-reason", "freeze until Monday\n"), p); err != nil {
				t.Fatal(err)
			}
			return p
		}, true, "freeze until Monday", false},
		{"undeterminable (parent is a file) fails safe", func(t *testing.T, dir string) string {
			return filepath.Join(writeFile(t, dir, "etc", ""), "disable")
		}, true, "cannot tell whether kill switch *", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.setup(t, t.TempDir())
			set, reason, err := KillSwitch(path)
			if set != tt.set || (err != nil) != tt.wantErr {
				t.Fatalf("set %v err %v, want set %v err %v", set, err, tt.set, tt.wantErr)
			}
			if p, ok := strings.CutSuffix(tt.reason, "*"); ok {
				if !strings.HasPrefix(reason, p) || (tt.wantErr && !strings.HasSuffix(reason, "treating it as set")) {
					t.Errorf("reason %q, want prefix %q", reason, p)
				}
			} else if reason != tt.reason {
				t.Errorf("reason %q, want %q", reason, tt.reason)
			}
		})
	}
}

// As a non-root user a directory without search permission hides the
// switch: that must count as set.
func TestKillSwitchPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root is not stopped by permissions")
	}
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(sub, 0o755) })
	set, reason, err := KillSwitch(filepath.Join(sub, "disable"))
	if !set || err == nil || !strings.Contains(reason, "permission denied") {
		t.Errorf("set %v reason %q err %v", set, reason, err)
	}
}

func TestBootID(t *testing.T) {
	tests := []struct {
		name    string
		content *string
		want    string
		wantErr string
	}{
		{"normal", ptr("6f0e2c1a-0000-4000-8000-000000000001\n"), "6f0e2c1a-0000-4000-8000-000000000001", ""},
		{"empty", ptr("\n"), "", "is empty"},
		{"missing", nil, "", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if tt.content != nil {
				fakeBootID(t, root, *tt.content)
			}
			got, err := BootID(root)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v", got, err)
			}
		})
	}
	t.Run("the real one", func(t *testing.T) {
		if _, err := os.Stat("/proc/sys/kernel/random/boot_id"); err != nil {
			t.Skip("no /proc here")
		}
		if id, err := BootID(""); err != nil || id == "" {
			t.Fatalf("%q %v", id, err)
		}
	})
}

func ptr(s string) *string { return &s }

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func fakeBootID(t *testing.T, root, content string) {
	t.Helper()
	d := filepath.Join(root, "proc/sys/kernel/random")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, d, "boot_id", content)
}
