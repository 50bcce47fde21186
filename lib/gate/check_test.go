package gate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// writeScript writes an executable script body into dir with mode perm.
func writeScript(t *testing.T, dir, name, body string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Chmod: WriteFile's mode is filtered by the umask.
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
}

func TestCheckScript(t *testing.T) {
	euid := os.Geteuid()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) string
		euid  int
		want  string // substring of the error; "" = accepted
	}{
		{"good script", func(t *testing.T, dir string) string {
			return writeScript(t, dir, "ok", "exit 0", 0o755)
		}, euid, ""},
		{"owner-only executable", func(t *testing.T, dir string) string {
			return writeScript(t, dir, "ok", "exit 0", 0o700)
		}, euid, ""},
		{"empty path", func(t *testing.T, dir string) string { return "" }, euid, "health_script is empty"},
		{"relative path", func(t *testing.T, dir string) string { return "check.sh" }, euid, "not an absolute path"},
		{"missing", func(t *testing.T, dir string) string { return filepath.Join(dir, "nope") }, euid, "does not exist"},
		{"dangling symlink", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "link")
			if err := os.Symlink(filepath.Join(dir, "nope"), p); err != nil {
				t.Fatal(err)
			}
			return p
		}, euid, "does not exist"},
		{"directory", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "d")
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			return p
		}, euid, "is a directory; point health_script at an executable file"},
		{"not executable", func(t *testing.T, dir string) string {
			return writeScript(t, dir, "s", "exit 0", 0o644)
		}, euid, "is not executable; chmod 0755"},
		{"world-writable", func(t *testing.T, dir string) string {
			return writeScript(t, dir, "s", "exit 0", 0o757)
		}, euid, "is world-writable, so any user could run code as root through it; chmod o-w"},
		{"symlink to world-writable", func(t *testing.T, dir string) string {
			real := writeScript(t, dir, "s", "exit 0", 0o777)
			p := filepath.Join(dir, "link")
			if err := os.Symlink(real, p); err != nil {
				t.Fatal(err)
			}
			return p
		}, euid, "world-writable"},
		{"symlink to good script", func(t *testing.T, dir string) string {
			real := writeScript(t, dir, "s", "exit 0", 0o755)
			p := filepath.Join(dir, "link")
			if err := os.Symlink(real, p); err != nil {
				t.Fatal(err)
			}
			return p
		}, euid, ""},
		{"group-writable by root group", func(t *testing.T, dir string) string {
			needRoot(t)
			return writeScript(t, dir, "s", "exit 0", 0o775)
		}, euid, ""},
		{"group-writable by another group", func(t *testing.T, dir string) string {
			needRoot(t)
			p := writeScript(t, dir, "s", "exit 0", 0o775)
			if err := os.Chown(p, 0, 4242); err != nil {
				t.Fatal(err)
			}
			return p
		}, euid, "writable by group 4242; chmod g-w"},
		{"owned by another user", func(t *testing.T, dir string) string {
			needRoot(t)
			p := writeScript(t, dir, "s", "exit 0", 0o755)
			if err := os.Chown(p, 4242, 0); err != nil {
				t.Fatal(err)
			}
			return p
		}, 0, "owned by uid 4242"},
		{"owned by the effective user", func(t *testing.T, dir string) string {
			needRoot(t)
			p := writeScript(t, dir, "s", "exit 0", 0o755)
			if err := os.Chown(p, 4242, 0); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, 4242, 0); err != nil {
				t.Fatal(err)
			}
			return p
		}, 4242, ""},
		{"directory world-writable", func(t *testing.T, dir string) string {
			p := writeScript(t, dir, "s", "exit 0", 0o755)
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			return p
		}, euid, "is world-writable"},
		{"directory world-writable but sticky", func(t *testing.T, dir string) string {
			p := writeScript(t, dir, "s", "exit 0", 0o755)
			if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
				t.Fatal(err)
			}
			return p
		}, euid, ""},
		{"directory owned by another user", func(t *testing.T, dir string) string {
			needRoot(t)
			p := writeScript(t, dir, "s", "exit 0", 0o755)
			if err := os.Chown(dir, 4242, 0); err != nil {
				t.Fatal(err)
			}
			return p
		}, 0, "directory DIR is owned by uid 4242"},
		// Issue 17: every component counts, as given and as resolved.
		{"symlink owned by nobody to /bin/true", func(t *testing.T, dir string) string {
			needRoot(t)
			p := filepath.Join(dir, "link")
			if err := os.Symlink("/bin/true", p); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return p
		}, 0, "symbolic link DIR/link is owned by uid 65534"},
		{"world-writable ancestor that is not sticky", func(t *testing.T, dir string) string {
			sub := filepath.Join(dir, "sub")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			p := writeScript(t, sub, "s", "exit 0", 0o755)
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			return p
		}, euid, "directory DIR is world-writable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := tt.setup(t, dir)
			err := checkScript(path, tt.euid)
			want := strings.ReplaceAll(tt.want, "DIR", dir)
			if want == "" {
				if err != nil {
					t.Fatalf("want accepted, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want error containing %q, got nil", want)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain %q", err, want)
			}
			if c := exitcode.CodeOf(err); c != exitcode.Config {
				t.Errorf("code %v, want config", c)
			}
		})
	}
}

func TestCheckScriptRealEUID(t *testing.T) {
	// The exported wrapper accepts a system binary (the documented opt-out).
	if err := CheckScript("/bin/true"); err != nil {
		t.Fatal(err)
	}
}
