package trust

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
}

func mkdir(t *testing.T, p string, mode os.FileMode, uid int) string {
	t.Helper()
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	chmodChown(t, p, mode, uid)
	return p
}

func file(t *testing.T, p string, mode os.FileMode, uid int) string {
	t.Helper()
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	chmodChown(t, p, mode, uid)
	return p
}

func symlink(t *testing.T, target, p string, uid int) string {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	if uid >= 0 {
		if err := os.Lchown(p, uid, 0); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func chmodChown(t *testing.T, p string, mode os.FileMode, uid int) {
	t.Helper()
	if uid >= 0 {
		if err := os.Chown(p, uid, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// The test's own directory is made root-owned and writable by root only, so
// that the verdicts do not depend on where TMPDIR is (a sticky /tmp is fine).
func TestCheck(t *testing.T) {
	needRoot(t)
	tests := []struct {
		name  string
		setup func(t *testing.T, d string) string
		want  string // substring of the error; "" = trusted
	}{
		{"root-owned script", func(t *testing.T, d string) string { return file(t, d+"/s", 0o755, 0) }, ""},
		{"a system binary", func(t *testing.T, d string) string { return "/bin/true" }, ""},
		{"symlink owned by root to a trusted file", func(t *testing.T, d string) string {
			return symlink(t, "/bin/true", d+"/l", 0)
		}, ""},
		{"relative symlink with ..", func(t *testing.T, d string) string {
			mkdir(t, d+"/a", 0o755, 0)
			file(t, d+"/s", 0o755, 0)
			return symlink(t, "../s", d+"/a/l", 0)
		}, ""},
		{"symlink owned by nobody to /bin/true", func(t *testing.T, d string) string {
			return symlink(t, "/bin/true", d+"/l", nobody)
		}, "symbolic link DIR/l is owned by uid 65534, who could change what runs as root; chown -h root DIR/l"},
		{"symlink into a directory nobody owns", func(t *testing.T, d string) string {
			mkdir(t, d+"/theirs", 0o755, nobody)
			file(t, d+"/theirs/s", 0o755, 0)
			return symlink(t, d+"/theirs/s", d+"/l", 0)
		}, "directory DIR/theirs is owned by uid 65534"},
		{"a symlinked directory on the way", func(t *testing.T, d string) string {
			mkdir(t, d+"/open", 0o777, 0)
			mkdir(t, d+"/open/bin", 0o755, 0)
			file(t, d+"/open/bin/s", 0o755, 0)
			symlink(t, d+"/open/bin", d+"/bin", 0)
			return d + "/bin/s"
		}, "directory DIR/open is world-writable"},
		{"world-writable ancestor, not sticky", func(t *testing.T, d string) string {
			mkdir(t, d+"/open", 0o777, 0)
			mkdir(t, d+"/open/sub", 0o755, 0)
			return file(t, d+"/open/sub/s", 0o755, 0)
		}, "directory DIR/open is world-writable, so any user could run code as root through it; chmod o-w DIR/open"},
		{"sticky world-writable ancestor, root-owned below", func(t *testing.T, d string) string {
			mkdir(t, d+"/tmp", 0o777|os.ModeSticky, 0)
			mkdir(t, d+"/tmp/sub", 0o755, 0)
			return file(t, d+"/tmp/sub/s", 0o755, 0)
		}, ""},
		{"sticky world-writable ancestor, another user's entry", func(t *testing.T, d string) string {
			mkdir(t, d+"/tmp", 0o777|os.ModeSticky, 0)
			mkdir(t, d+"/tmp/sub", 0o755, nobody)
			return file(t, d+"/tmp/sub/s", 0o755, 0)
		}, "directory DIR/tmp/sub is owned by uid 65534"},
		{"group-writable by root's group", func(t *testing.T, d string) string { return file(t, d+"/s", 0o775, 0) }, ""},
		{"group-writable by another group", func(t *testing.T, d string) string {
			p := file(t, d+"/s", 0o775, 0)
			if err := os.Chown(p, 0, 4242); err != nil {
				t.Fatal(err)
			}
			return p
		}, "file DIR/s is writable by group 4242; chmod g-w DIR/s"},
		{"world-writable file", func(t *testing.T, d string) string { return file(t, d+"/s", 0o757, 0) }, "file DIR/s is world-writable"},
		{"file owned by another user", func(t *testing.T, d string) string { return file(t, d+"/s", 0o755, nobody) }, "file DIR/s is owned by uid 65534"},
		{"symlink loop", func(t *testing.T, d string) string {
			symlink(t, d+"/b", d+"/a", 0)
			return symlink(t, d+"/a", d+"/b", 0)
		}, "too many levels of symbolic links"},
		{"relative path", func(t *testing.T, d string) string { return "bin/true" }, "is not an absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mkdir(t, filepath.Join(t.TempDir(), "root"), 0o755, 0)
			path := tt.setup(t, d)
			err := Check(path, 0)
			want := strings.ReplaceAll(tt.want, "DIR", d)
			if want == "" {
				if err != nil {
					t.Fatalf("want trusted, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v\nwant it to contain %q", err, want)
			}
		})
	}
}

// The effective user may own what it runs; others may not.
func TestCheckEffectiveUser(t *testing.T) {
	needRoot(t)
	d := mkdir(t, filepath.Join(t.TempDir(), "root"), 0o755, 0)
	mkdir(t, d+"/home", 0o755, 4242)
	p := file(t, d+"/home/s", 0o755, 4242)
	if err := Check(p, 4242); err != nil {
		t.Errorf("euid 4242 owns it: %v", err)
	}
	if err := Check(p, 0); err == nil || !IsUntrusted(err) {
		t.Errorf("root must not trust uid 4242's file: %v", err)
	}
}

func TestCheckMissing(t *testing.T) {
	err := Check(filepath.Join(t.TempDir(), "nope"), os.Geteuid())
	if !errors.Is(err, fs.ErrNotExist) || IsUntrusted(err) {
		t.Errorf("want a not-exist path error, got %v", err)
	}
}

func TestPrivateDir(t *testing.T) {
	needRoot(t)
	tests := []struct {
		name  string
		setup func(t *testing.T, d string) string
		want  string
	}{
		{"root's private directory", func(t *testing.T, d string) string { return mkdir(t, d+"/state", 0o750, 0) }, ""},
		{"sticky and world-writable", func(t *testing.T, d string) string {
			return mkdir(t, d+"/state", 0o777|os.ModeSticky, 0)
		}, "directory DIR/state is writable by group or others (mode 0777); chmod go-w DIR/state"},
		{"group-writable by root's group", func(t *testing.T, d string) string { return mkdir(t, d+"/state", 0o770, 0) }, "writable by group or others"},
		{"owned by another user", func(t *testing.T, d string) string { return mkdir(t, d+"/state", 0o700, nobody) }, "directory DIR/state is owned by uid 65534"},
		{"a link owned by nobody to a private directory", func(t *testing.T, d string) string {
			mkdir(t, d+"/real", 0o700, 0)
			return symlink(t, d+"/real", d+"/state", nobody)
		}, "symbolic link DIR/state is owned by uid 65534"},
		{"not a directory", func(t *testing.T, d string) string { return file(t, d+"/state", 0o600, 0) }, "is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mkdir(t, filepath.Join(t.TempDir(), "root"), 0o755, 0)
			err := PrivateDir(tt.setup(t, d), 0)
			want := strings.ReplaceAll(tt.want, "DIR", d)
			if want == "" {
				if err != nil {
					t.Fatalf("want accepted, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v\nwant it to contain %q", err, want)
			}
		})
	}
}
