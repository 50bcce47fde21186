package detect

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// The kernel detector against the file lists of real kernel packages in
// testdata/kernels: Debian's from `dpkg -c` of the packages the mirror
// serves, RHEL's and SUSE's written from their spec files (each file says
// where it came from). A line is a path the package lays out ("-> X": a
// symlink); a line starting with "+ " is a file its maintainer scripts
// create (RHEL's and SUSE's %ghost files). Each case puts the packages of
// one machine, in one state of a transaction, under a root.

// layout is the paths of testdata/kernels/NAME.list: the payload, and with
// scripts also the "+ " lines. rename pairs replace a release in every path
// (the same layout for another version).
func layout(t *testing.T, name string, scripts bool, rename ...string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "kernels", name+".list"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if l, ok := strings.CutPrefix(line, "+ "); ok {
			if !scripts {
				continue
			}
			line = l
		}
		for i := 0; i+1 < len(rename); i += 2 {
			line = strings.ReplaceAll(line, rename[i], rename[i+1])
		}
		p, target, link := strings.Cut(line, " -> ")
		p = strings.TrimPrefix(p, "/")
		if p == "" {
			continue
		}
		switch {
		case link:
			files[p] = "->" + target
		case strings.HasSuffix(p, "/"):
			files[p] = ""
		default:
			files[p] = "x"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return files
}

// debianPostinst is what a Debian kernel package's postinst creates for
// release v, as seen in make e2e-vm's VMs after `dpkg -i`: depmod's
// indexes, the initramfs (/etc/kernel/postinst.d/initramfs-tools) and the
// /vmlinuz links (linux-update-symlinks).
func debianPostinst(v string) map[string]string {
	files := debianDepmod(v)
	files["boot/initrd.img-"+v] = "x"
	files["vmlinuz"] = "->boot/vmlinuz-" + v
	files["initrd.img"] = "->boot/initrd.img-" + v
	return files
}

// debianDepmod is what stays of a kernel after `dpkg -r` (not --purge): the
// package's postrm deletes depmod's files only on purge (seen in make
// e2e-vm's VMs: `dpkg -l` says rc, /boot has nothing of it left).
func debianDepmod(v string) map[string]string {
	files := map[string]string{}
	for _, m := range []string{"alias", "alias.bin", "builtin.alias.bin", "builtin.bin", "dep", "dep.bin", "devname", "softdep", "symbols", "symbols.bin"} {
		files["lib/modules/"+v+"/modules."+m] = "x"
	}
	return files
}

func merge(sets ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, s := range sets {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}

func TestKernelDetectorPackageLayouts(t *testing.T) {
	const (
		deb50  = "6.1.0-50-cloud-amd64"
		deb57  = "6.1.0-57-cloud-amd64"
		deb612 = "6.12.117+deb12-cloud-amd64"
		el93   = "5.14.0-362.24.1.el9_3.x86_64"
		el94   = "5.14.0-427.13.1.el9_4.x86_64"
		sle7   = "6.4.0-150600.23.7-default"
		sle25  = "6.4.0-150600.23.25-default"
		tw3    = "6.11.3-1-default"
		tw5    = "6.11.5-1-default"
	)
	debian50 := merge(layout(t, "debian-linux-image-"+deb50, false), debianPostinst(deb50))
	debian57 := layout(t, "debian-linux-image-"+deb57, false)
	tests := []struct {
		name     string
		files    map[string]string
		running  string
		required bool
		detail   string
	}{
		// Debian 12: /boot/vmlinuz-V is in the package; modules.dep and the
		// initramfs come from its postinst.
		{"debian: one kernel, running", debian50, deb50, false, "running kernel " + deb50 + " is the newest installed"},
		{"debian: the new kernel unpacked, its postinst not yet run (lib/pkgbusy stops the reboot)",
			merge(debian50, debian57), deb50, true, "newest installed " + deb57 + " (/boot/vmlinuz-" + deb57 + ")"},
		{"debian: the new kernel configured", merge(debian50, debian57, debianPostinst(deb57)), deb50, true, "newest installed " + deb57},
		{"debian: rebooted into it", merge(debian50, debian57, debianPostinst(deb57)), deb57, false, "running kernel " + deb57 + " is the newest installed"},
		{"debian: the new kernel removed, not purged: its depmod files stay, it is not installed",
			merge(debian50, debianDepmod(deb57)), deb50, false, "running kernel " + deb50 + " is the newest installed"},
		{"debian: the 6.12 backport (+deb12 in the version, same flavor)",
			merge(debian50, layout(t, "debian-linux-image-"+deb612, false), debianPostinst(deb612)), deb50, true, "newest installed " + deb612},
		{"debian: a container given /lib/modules alone counts modules.dep",
			onlyUnder("lib/", merge(debian50, debian57, debianPostinst(deb57))), deb50, true, "(/lib/modules/" + deb57 + "/modules.dep)"},

		// RHEL 9: the image is in the payload under /lib/modules; %posttrans
		// (kernel-install) copies it to /boot and builds the initramfs.
		{"rhel: one kernel, running", layout(t, "rhel9-kernel-core-"+el93, true), el93, false, "is the newest installed"},
		{"rhel: the new kernel unpacked, %posttrans not yet run (rpm holds its lock: lib/pkgbusy)",
			merge(layout(t, "rhel9-kernel-core-"+el93, true), layout(t, "rhel9-kernel-core-"+el94, false)), el93, true,
			"newest installed " + el94 + " (/lib/modules/" + el94 + "/vmlinuz)"},
		{"rhel: the new kernel installed", merge(layout(t, "rhel9-kernel-core-"+el93, true), layout(t, "rhel9-kernel-core-"+el94, true)), el93, true,
			"newest installed " + el94 + " (/boot/vmlinuz-" + el94 + ")"},
		{"rhel: the new kernel erased, weak-updates left behind",
			merge(layout(t, "rhel9-kernel-core-"+el93, true), map[string]string{"lib/modules/" + el94 + "/weak-updates/": ""}), el93, false, "is the newest installed"},

		// SLES 15: like Debian, the image is in /boot in the payload.
		{"sles: a newer kernel-default next to the running one",
			merge(layout(t, "sles15-kernel-default-6.4.0-150600.23.25.1.x86_64", true, sle25, sle7), layout(t, "sles15-kernel-default-6.4.0-150600.23.25.1.x86_64", true)),
			sle7, true, "newest installed " + sle25 + " (/boot/vmlinu"},
		{"sles: running the newest", layout(t, "sles15-kernel-default-6.4.0-150600.23.25.1.x86_64", true), sle25, false, "is the newest installed"},

		// Tumbleweed / SLE 16: /usr merged, the image in /usr/lib/modules.
		{"tumbleweed: the new kernel unpacked, its %post not yet run",
			merge(layout(t, "tumbleweed-kernel-default-6.11.5-1.1.x86_64", true, tw5, tw3), layout(t, "tumbleweed-kernel-default-6.11.5-1.1.x86_64", false)),
			tw3, true, "newest installed " + tw5 + " (/lib/modules/" + tw5 + "/vmlinuz)"},
		{"tumbleweed: running the newest", layout(t, "tumbleweed-kernel-default-6.11.5-1.1.x86_64", true), tw5, false, "is the newest installed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := Env{Root: testsupport.Tree(t, tt.files), Uname: func() (string, error) { return tt.running, nil }}
			ds, err := New([]detectspec.Detector{{Type: "kernel"}}, env)
			if err != nil {
				t.Fatal(err)
			}
			r := ds[0].Detect(context.Background())
			if r.Err != "" || r.Required != tt.required || !strings.Contains(r.Detail, tt.detail) {
				t.Fatalf("result %+v; want required=%v, detail containing %q", r, tt.required, tt.detail)
			}
		})
	}
}

// onlyUnder keeps the files below prefix.
func onlyUnder(prefix string, files map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range files {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}
