package detect

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

func TestOSReleaseFamily(t *testing.T) {
	tests := []struct {
		name, data, wantID, want string
	}{
		{"debian", "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n", "debian", FamilyDebian},
		{"ubuntu", "ID=ubuntu\nID_LIKE=debian\n", "ubuntu", FamilyDebian},
		{"mint via ID_LIKE", "ID=linuxmint\nID_LIKE=\"ubuntu debian\"\n", "linuxmint", FamilyDebian},
		{"rhel", "ID=\"rhel\"\nID_LIKE=\"fedora\"\n", "rhel", FamilyRHEL},
		{"rocky", "ID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\n", "rocky", FamilyRHEL},
		{"alma", "ID='almalinux'\n", "almalinux", FamilyRHEL},
		{"oracle via ID_LIKE", "ID=\"ol\"\nID_LIKE=\"fedora\"\n", "ol", FamilyRHEL},
		{"opensuse leap", "ID=\"opensuse-leap\"\nID_LIKE=\"suse opensuse\"\n", "opensuse-leap", FamilySUSE},
		{"sles", "ID=\"sles\"\n", "sles", FamilySUSE},
		{"sle micro", "ID=\"sle-micro\"\n", "sle-micro", FamilySUSE},
		{"unknown", "ID=alpine\n", "alpine", ""},
		{"comments and junk", "# ID=debian\nnonsense\nID=\"gentoo\\\"\"\n", "gentoo\"", ""},
		{"empty", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := parseOSRelease(tt.data)
			if o.ID != tt.wantID || o.Family() != tt.want {
				t.Errorf("parse %q = %+v family %q; want ID %q family %q", tt.data, o, o.Family(), tt.wantID, tt.want)
			}
		})
	}
}

func TestAutoDetector(t *testing.T) {
	debian := "ID=debian\n"
	tests := []struct {
		name         string
		files        map[string]string
		answers      map[string]proc.Result
		wantRequired bool
		wantPkgs     []string
		wantDetail   string
		wantErr      string
		wantRan      []string
	}{
		{
			name:       "debian, no marker",
			files:      map[string]string{"etc/os-release": debian},
			wantDetail: "os-release ID=debian: /var/run/reboot-required absent",
		},
		{
			name:         "ubuntu, marker with packages, os-release via symlink",
			files:        map[string]string{"etc/os-release": "->../usr/lib/os-release", "usr/lib/os-release": "ID=ubuntu\nID_LIKE=debian\n", "var/run": "->/run", "run/reboot-required": "", "run/reboot-required.pkgs": "linux-base\n"},
			wantRequired: true,
			wantPkgs:     []string{"linux-base"},
			wantDetail:   "os-release ID=ubuntu ID_LIKE=\"debian\": /var/run/reboot-required present",
		},
		{
			name:       "only /usr/lib/os-release",
			files:      map[string]string{"usr/lib/os-release": debian},
			wantDetail: "ID=debian",
		},
		{
			name:         "rhel needed",
			files:        map[string]string{"etc/os-release": "ID=rhel\n"},
			answers:      map[string]proc.Result{"needs-restarting -r": {ExitCode: 1}},
			wantRequired: true,
			wantDetail:   "needs-restarting -r exited 1 (reboot needed)",
			wantRan:      []string{"needs-restarting -r"},
		},
		{
			name:    "rhel without needs-restarting is an error",
			files:   map[string]string{"etc/os-release": "ID=rocky\n"},
			wantErr: "needs-restarting not found",
			wantRan: []string{"needs-restarting -r"},
		},
		{
			name:       "suse, neither says needed",
			files:      map[string]string{"etc/os-release": "ID=opensuse-tumbleweed\n"},
			answers:    map[string]proc.Result{"zypper needs-rebooting": {ExitCode: 0}},
			wantDetail: "zypper needs-rebooting exited 0 (no reboot needed); /run/reboot-needed absent",
			wantRan:    []string{"zypper needs-rebooting"},
		},
		{
			name:         "suse, zypper 102",
			files:        map[string]string{"etc/os-release": "ID=sles\n"},
			answers:      map[string]proc.Result{"zypper needs-rebooting": {ExitCode: 102}},
			wantRequired: true,
			wantDetail:   "exited 102 (reboot needed)",
		},
		{
			name:         "suse, marker file",
			files:        map[string]string{"etc/os-release": "ID=sles\n", "run/reboot-needed": ""},
			answers:      map[string]proc.Result{"zypper needs-rebooting": {ExitCode: 0}},
			wantRequired: true,
			wantDetail:   "/run/reboot-needed present",
		},
		{
			name:    "suse, marker file but zypper fails: error",
			files:   map[string]string{"etc/os-release": "ID=sles\n", "run/reboot-needed": ""},
			answers: map[string]proc.Result{"zypper needs-rebooting": {ExitCode: 7}},
			wantErr: "os-release ID=sles: zypper needs-rebooting exited 7",
		},
		{
			name:    "unknown distribution",
			files:   map[string]string{"etc/os-release": "ID=alpine\n"},
			wantErr: "auto: os-release ID=alpine is not a distribution the auto detector knows",
		},
		{
			name:    "no os-release",
			files:   map[string]string{"etc/": ""},
			wantErr: "neither /etc/os-release nor /usr/lib/os-release exists under root",
		},
		{
			name:    "os-release unreadable",
			files:   map[string]string{"etc/os-release/": ""},
			wantErr: "cannot read /etc/os-release",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := &fakeRunner{answers: tt.answers}
			ds, err := New([]detectspec.Detector{{Type: "auto"}}, Env{Root: testsupport.Tree(t, tt.files), Runner: fr})
			if err != nil {
				t.Fatal(err)
			}
			r := ds[0].Detect(context.Background())
			if r.Name != "auto" || r.Type != "auto" {
				t.Errorf("name/type = %q/%q", r.Name, r.Type)
			}
			if tt.wantErr != "" {
				if !strings.Contains(r.Err, tt.wantErr) || r.Required || r.Packages != nil {
					t.Fatalf("result %+v, want error containing %q", r, tt.wantErr)
				}
			} else if r.Err != "" || r.Required != tt.wantRequired || !strings.Contains(r.Detail, tt.wantDetail) || !slices.Equal(r.Packages, tt.wantPkgs) {
				t.Fatalf("result %+v; want required=%v packages=%v detail containing %q", r, tt.wantRequired, tt.wantPkgs, tt.wantDetail)
			}
			if tt.wantRan != nil {
				var ran []string
				for _, s := range fr.specs {
					ran = append(ran, strings.Join(s.Argv, " "))
				}
				if !slices.Equal(ran, tt.wantRan) {
					t.Errorf("ran %q, want %q", ran, tt.wantRan)
				}
			}
		})
	}
}
