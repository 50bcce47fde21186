package detect

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

func TestResolve(t *testing.T) {
	root := testsupport.Tree(t, map[string]string{
		"run/reboot-required": "",
		"var/run":             "->/run",
		"var/rel":             "->../run",
		"etc/os-release":      "->../usr/lib/os-release",
		"usr/lib/os-release":  "ID=debian\n",
		"escape":              "->../../../../etc",
		"loop1":               "->/loop2",
		"loop2":               "->/loop1",
	})
	tests := []struct {
		name, path, want string
		wantErr          string
	}{
		{"plain", "/run/reboot-required", "/run/reboot-required", ""},
		{"absolute symlink stays under root", "/var/run/reboot-required", "/run/reboot-required", ""},
		{"relative symlink", "/var/rel/reboot-required", "/run/reboot-required", ""},
		{"relative symlink to a file", "/etc/os-release", "/usr/lib/os-release", ""},
		{"dot-dot stops at root", "/../../run/reboot-required", "/run/reboot-required", ""},
		{"symlink with dot-dots stops at root", "/escape/passwd", "/etc/passwd", ""},
		{"missing rest is joined", "/var/run/nothing/../x", "/run/x", ""},
		{"loop", "/loop1/x", "", "too many levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Env{Root: root}.resolve(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("resolve(%q) = %q, %v; want error %q", tt.path, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(root, tt.want); got != want {
				t.Errorf("resolve(%q) = %q, want %q", tt.path, got, want)
			}
		})
	}
	t.Run("no root: the kernel resolves the path", func(t *testing.T) {
		for _, r := range []string{"", "/"} {
			got, err := Env{Root: r}.resolve("/var/run/../run/x")
			if err != nil || got != "/var/run/../run/x" {
				t.Errorf("root %q: got %q, %v", r, got, err)
			}
		}
	})
	t.Run("display", func(t *testing.T) {
		if got := (Env{}).display("/x"); got != "/x" {
			t.Errorf("got %q", got)
		}
		if got := (Env{Root: "/r"}).display("/x"); got != "/x under root /r" {
			t.Errorf("got %q", got)
		}
	})
}
