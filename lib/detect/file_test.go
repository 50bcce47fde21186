package detect

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

func TestFileDetector(t *testing.T) {
	tests := []struct {
		name         string
		files        map[string]string
		path         string
		wantRequired bool
		wantPkgs     []string
		wantDetail   string
		wantErr      string
	}{
		{
			name:       "absent",
			files:      map[string]string{"run/": ""},
			path:       "/var/run/reboot-required",
			wantDetail: "/var/run/reboot-required absent",
		},
		{
			name:         "present through the /var/run symlink, packages deduplicated",
			files:        map[string]string{"var/run": "->/run", "run/reboot-required": "*** System restart required ***\n", "run/reboot-required.pkgs": "linux-image-6.1.0-28-amd64\nlibc6\n\nlinux-image-6.1.0-28-amd64\n"},
			path:         "/var/run/reboot-required",
			wantRequired: true,
			wantPkgs:     []string{"linux-image-6.1.0-28-amd64", "libc6"},
			wantDetail:   "packages: linux-image-6.1.0-28-amd64, libc6",
		},
		{
			name:         "present without pkgs",
			files:        map[string]string{"run/reboot-needed": ""},
			path:         "/run/reboot-needed",
			wantRequired: true,
			wantDetail:   "/run/reboot-needed present since ",
		},
		{
			name:         "unreadable pkgs still required",
			files:        map[string]string{"run/reboot-required": "", "run/reboot-required.pkgs/": ""},
			path:         "/run/reboot-required",
			wantRequired: true,
			wantDetail:   "reboot-required.pkgs unreadable",
		},
		{
			name:    "a path component is a file: error, not absent",
			files:   map[string]string{"run": "not a directory"},
			path:    "/run/reboot-required",
			wantErr: "cannot check /run/reboot-required under root",
		},
		{
			name:    "symlink loop",
			files:   map[string]string{"a": "->/b", "b": "->/a"},
			path:    "/a/x",
			wantErr: "too many levels",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := Env{Root: testsupport.Tree(t, tt.files)}
			ds, err := New([]detectspec.Detector{{Type: "file", Path: tt.path}}, env)
			if err != nil {
				t.Fatal(err)
			}
			r := ds[0].Detect(context.Background())
			if r.Name != "file:"+tt.path || r.Type != "file" {
				t.Errorf("name/type = %q/%q", r.Name, r.Type)
			}
			if tt.wantErr != "" {
				if !strings.Contains(r.Err, tt.wantErr) || r.Required {
					t.Fatalf("result %+v, want error containing %q", r, tt.wantErr)
				}
				return
			}
			if r.Err != "" {
				t.Fatalf("unexpected error %q", r.Err)
			}
			if r.Required != tt.wantRequired || !slices.Equal(r.Packages, tt.wantPkgs) || !strings.Contains(r.Detail, tt.wantDetail) {
				t.Errorf("result %+v; want required=%v packages=%v detail containing %q", r, tt.wantRequired, tt.wantPkgs, tt.wantDetail)
			}
		})
	}
}
