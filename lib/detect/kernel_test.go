package detect

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

func TestKernelDetector(t *testing.T) {
	debian := map[string]string{
		"boot/vmlinuz-6.1.0-9-amd64":                "",
		"boot/vmlinuz-6.1.0-28-amd64":               "",
		"boot/vmlinuz.old":                          "->vmlinuz-6.1.0-9-amd64",
		"lib/modules/6.1.0-9-amd64/modules.dep":     "",
		"lib/modules/6.1.0-28-amd64/modules.dep":    "",
		"lib/modules/6.1.0-99-amd64/updates/dkms/x": "",
	}
	tests := []struct {
		name         string
		files        map[string]string
		running      string
		unameErr     error
		wantRequired bool
		wantDetail   string
		wantErr      string
	}{
		{"debian newer installed", debian, "6.1.0-9-amd64", nil, true, "running kernel 6.1.0-9-amd64, newest installed 6.1.0-28-amd64 (/boot/vmlinuz-6.1.0-28-amd64)", ""},
		{"debian running newest; DKMS leftover ignored", debian, "6.1.0-28-amd64", nil, false, "running kernel 6.1.0-28-amd64 is the newest installed", ""},
		{"uname with newline", debian, "6.1.0-28-amd64\n", nil, false, "is the newest installed", ""},
		{"running newer than installed", debian, "6.1.0-30-amd64", nil, false, "is newer than every installed one (newest 6.1.0-28-amd64)", ""},
		{
			"other flavor ignored",
			map[string]string{"boot/vmlinuz-6.1.0-28-amd64": "", "boot/vmlinuz-6.1.0-30-cloud-amd64": ""},
			"6.1.0-28-amd64", nil, false, "is the newest installed", "",
		},
		{
			"modules only, as in a container without /boot",
			map[string]string{"lib/modules/6.1.0-9-amd64/modules.dep": "", "lib/modules/6.1.0-28-amd64/modules.dep": ""},
			"6.1.0-9-amd64", nil, true, "newest installed 6.1.0-28-amd64 (/lib/modules/6.1.0-28-amd64/modules.dep)", "",
		},
		{
			"rhel, images in /lib/modules via usrmerge symlink, rescue ignored",
			map[string]string{
				"lib": "->usr/lib",
				"usr/lib/modules/5.14.0-362.24.1.el9_3.x86_64/vmlinuz": "",
				"usr/lib/modules/5.14.0-427.13.1.el9_4.x86_64/vmlinuz": "",
				"boot/vmlinuz-0-rescue-0123456789abcdef":               "",
			},
			"5.14.0-362.24.1.el9_3.x86_64", nil, true, "newest installed 5.14.0-427.13.1.el9_4.x86_64", "",
		},
		{
			"suse with vmlinux.gz debug copy",
			map[string]string{"boot/vmlinux-6.4.0-150600.23.25-default.gz": "", "boot/Image-6.4.0-150600.23.7-default": ""},
			"6.4.0-150600.23.7-default", nil, true, "newest installed 6.4.0-150600.23.25-default", "",
		},
		{"uname fails", debian, "", errors.New("boom"), false, "", "cannot read the running kernel release: boom"},
		{"uname empty", debian, "", nil, false, "", "running kernel release is empty"},
		{"nothing installed", map[string]string{"etc/": ""}, "6.1.0-9-amd64", nil, false, "", "found neither /boot nor /lib/modules under root"},
		{"only leftovers", map[string]string{"lib/modules/6.1.0-9-amd64/": ""}, "6.1.0-9-amd64", nil, false, "", "found no kernel image or module index"},
		{
			"no kernel of the running flavor",
			map[string]string{"boot/vmlinuz-6.1.0-28-cloud-amd64": ""},
			"6.1.0-28-amd64", nil, false, "", `no installed kernel of the running flavor "amd64" (running 6.1.0-28-amd64)`,
		},
		{"boot unreadable", map[string]string{"boot": "a file"}, "6.1.0-9-amd64", nil, false, "", "cannot list /boot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := Env{Root: testsupport.Tree(t, tt.files), Uname: func() (string, error) { return tt.running, tt.unameErr }}
			ds, err := New([]detectspec.Detector{{Type: "kernel"}}, env)
			if err != nil {
				t.Fatal(err)
			}
			r := ds[0].Detect(context.Background())
			if r.Name != "kernel" || r.Type != "kernel" {
				t.Errorf("name/type = %q/%q", r.Name, r.Type)
			}
			if tt.wantErr != "" {
				if !strings.Contains(r.Err, tt.wantErr) || r.Required {
					t.Fatalf("result %+v, want error containing %q", r, tt.wantErr)
				}
				return
			}
			if r.Err != "" || r.Required != tt.wantRequired || !strings.Contains(r.Detail, tt.wantDetail) {
				t.Fatalf("result %+v; want required=%v detail containing %q", r, tt.wantRequired, tt.wantDetail)
			}
		})
	}
}

func TestKernelRelease(t *testing.T) {
	rel, err := KernelRelease()
	if err != nil || rel == "" || strings.ContainsRune(rel, 0) {
		t.Fatalf("KernelRelease() = %q, %v", rel, err)
	}
	got, _ := (Env{}).uname()
	if got != rel {
		t.Errorf("default Uname = %q, want %q", got, rel)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil && strings.TrimSpace(string(b)) != rel {
		t.Errorf("KernelRelease() = %q, /proc/sys/kernel/osrelease says %q", rel, strings.TrimSpace(string(b)))
	}
}

// Kernels answers what the detector compares, for the health record: the
// running release even when no installed kernel can be found.
func TestKernels(t *testing.T) {
	root := testsupport.Tree(t, map[string]string{"boot/vmlinuz-6.1.0-9-amd64": "", "boot/vmlinuz-6.1.0-28-amd64": ""})
	running, installed, err := Kernels(Env{Root: root, Uname: func() (string, error) { return "6.1.0-9-amd64\n", nil }})
	if err != nil || running != "6.1.0-9-amd64" || installed != "6.1.0-28-amd64" {
		t.Fatalf("Kernels = %q, %q, %v; want the running 6.1.0-9-amd64 and the newest installed 6.1.0-28-amd64", running, installed, err)
	}
	running, installed, err = Kernels(Env{Root: testsupport.Tree(t, map[string]string{"etc/": ""}), Uname: func() (string, error) { return "6.1.0-9-amd64", nil }})
	if err == nil || running != "6.1.0-9-amd64" || installed != "" {
		t.Fatalf("Kernels without /boot = %q, %q, %v; want the running release and an error", running, installed, err)
	}
}
