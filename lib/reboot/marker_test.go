package reboot

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

func testMarker() Marker {
	return Marker{
		Version:     MarkerVersion,
		Node:        "node-a",
		BootID:      "6f0e2c1a-0000-4000-8000-000000000001",
		RequestedAt: time.Date(2026, 11, 29, 2, 59, 0, 0, time.UTC),
		Command:     []string{"/usr/bin/systemctl", "reboot"},
		Extra:       map[string]string{"fencing_token": "17", "lease_id": "694d7f1a2b3c"},
	}
}

func TestMarkerRoundTrip(t *testing.T) {
	stateDir := filepath.Join(t.TempDir(), "var/lib/clusterrebootd")
	m := testMarker()
	if err := WriteMarker(stateDir, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMarker(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("read back %+v\nwant      %+v", got, m)
	}
	assertMode(t, MarkerPath(stateDir), 0o644)
	assertMode(t, stateDir, 0o750)
	raw, _ := os.ReadFile(MarkerPath(stateDir))
	for _, field := range []string{`"node":"node-a"`, `"boot_id":"6f0e2c1a`, `"requested_at":"2026-11-29T02:59:00Z"`, `"command":["/usr/bin/systemctl","reboot"]`, `"fencing_token":"17"`, `"dry_run":false`} {
		if !strings.Contains(string(raw), field) {
			t.Errorf("marker lacks %s: %s", field, raw)
		}
	}

	// Overwriting replaces it whole and leaves no temporary files.
	m.Node = "node-b"
	m.Extra = nil
	if err := WriteMarker(stateDir, m); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadMarker(stateDir); !reflect.DeepEqual(got, m) {
		t.Errorf("after overwrite %+v", got)
	}
	if entries, _ := os.ReadDir(stateDir); len(entries) != 1 {
		t.Errorf("state dir holds %d entries, want only the marker", len(entries))
	}

	if err := RemoveMarker(stateDir); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMarker(stateDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after remove: %v", err)
	}
	if err := RemoveMarker(stateDir); err != nil {
		t.Errorf("removing a missing marker: %v", err)
	}
}

func TestReadMarkerInvalid(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, MarkerFile, "{not json")
	if _, err := ReadMarker(dir); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("err %v", err)
	}
}

func TestRemoveMarkerFails(t *testing.T) {
	// A marker path that is a non-empty directory cannot be removed.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, MarkerFile, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := RemoveMarker(dir); err == nil {
		t.Fatal("want an error")
	}
}

func TestWriteMarkerFailures(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T) string // returns the state dir
		want  string
	}{
		{"state dir below a regular file", func(t *testing.T) string {
			return filepath.Join(writeFile(t, t.TempDir(), "file", ""), "state")
		}, "not a directory"},
		{"read-only file system", func(t *testing.T) string {
			return mountTmpfs(t, "size=64k", unix.MS_RDONLY)
		}, "read-only file system"},
		{"disk full", func(t *testing.T) string {
			dir := mountTmpfs(t, "size=4k", 0)
			fill(t, dir)
			return dir
		}, "no space left on device"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stateDir := tt.setup(t)
			err := WriteMarker(stateDir, testMarker())
			if exitcode.CodeOf(err) != exitcode.RebootFailed {
				t.Fatalf("code %v (%v), want reboot_failed", exitcode.CodeOf(err), err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "refusing to reboot") {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
			if _, err := os.Stat(MarkerPath(stateDir)); err == nil {
				t.Error("a marker exists after a failed write")
			}
			if entries, _ := os.ReadDir(stateDir); len(entries) > 1 {
				t.Errorf("temporary files left: %v", entries)
			}
		})
	}
}

// mountTmpfs mounts a small tmpfs for the test, or skips when not permitted.
func mountTmpfs(t *testing.T, opts string, flags uintptr) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes into dir until the file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "ballast"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, 1024)
	for i := 0; i < 1<<16; i++ {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
	t.Fatal("the tmpfs never filled up")
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Errorf("%s has mode %o, want %o", path, fi.Mode().Perm(), want)
	}
}
