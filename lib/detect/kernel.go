package detect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
)

// KernelRelease returns the running kernel's release, as `uname -r` prints it.
func KernelRelease() (string, error) {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	release := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		release = append(release, byte(c))
	}
	return string(release), nil
}

// kernel compares the running kernel with the newest installed kernel of
// the same flavor.
type kernel struct {
	name string
	env  Env
}

func (k *kernel) Name() string { return k.name }
func (k *kernel) Type() string { return detectspec.TypeKernel }

func (k *kernel) Detect(ctx context.Context) Result {
	start := time.Now()
	r := checkKernel(k.env)
	r.Name, r.Type = k.name, detectspec.TypeKernel
	r.DurationMS = since(start)
	return r
}

func checkKernel(env Env) Result {
	var r Result
	running, newest, proof, err := newestKernel(env)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	switch c := CompareVersions(newest, running); {
	case c > 0:
		r.Required = true
		r.Detail = fmt.Sprintf("running kernel %s, newest installed %s (%s)", running, newest, proof)
	case c == 0:
		r.Detail = fmt.Sprintf("running kernel %s is the newest installed", running)
	default:
		r.Detail = fmt.Sprintf("running kernel %s is newer than every installed one (newest %s)", running, newest)
	}
	return r
}

// Kernels are the running kernel's release and the newest installed kernel
// of its flavor under env.Root: what the kernel detector compares, whether
// or not one is configured (the health record carries both). running is
// set whenever uname answers, also when err says why no installed kernel
// was found.
func Kernels(env Env) (running, installed string, err error) {
	running, installed, _, err = newestKernel(env)
	return running, installed, err
}

// newestKernel is the running kernel's release, the newest installed
// kernel of its flavor and the file that proves it is installed.
func newestKernel(env Env) (running, newest, proof string, err error) {
	running, err = env.uname()
	if err != nil {
		return "", "", "", fmt.Errorf("cannot read the running kernel release: %v", err)
	}
	running = strings.TrimSpace(running)
	if running == "" {
		return "", "", "", errors.New("the running kernel release is empty")
	}
	installed, err := installedKernels(env)
	if err != nil {
		return running, "", "", err
	}
	flavor := Flavor(running)
	var same, other []string
	for v := range installed {
		if Flavor(v) == flavor {
			same = append(same, v)
		} else {
			other = append(other, v)
		}
	}
	sort.Strings(other)
	if len(same) == 0 {
		msg := fmt.Sprintf("no installed kernel of the running flavor %q (running %s) under %s", flavor, running, env.display("/boot and /lib/modules"))
		if len(other) > 0 {
			msg += fmt.Sprintf("; found other flavors: %s", strings.Join(other, ", "))
		}
		msg += "; install the kernel or use another detector (in a container, mount the host's /boot or /lib/modules and pass --root)"
		return running, "", "", errors.New(msg)
	}
	sort.Slice(same, func(i, j int) bool { return CompareVersions(same[i], same[j]) < 0 })
	newest = same[len(same)-1]
	return running, newest, installed[newest], nil
}

// installedKernels maps each installed kernel release to the file that
// proves it, from /boot and /lib/modules (and /usr/lib/modules) under Root.
func installedKernels(env Env) (map[string]string, error) {
	found := map[string]string{}
	seenDir := false
	boot, err := readDir(env, "/boot")
	if err != nil {
		return nil, err
	}
	seenDir = seenDir || boot != nil
	// Kernel images in /boot: vmlinuz-VERSION (x86, most), vmlinux-VERSION
	// (ppc64, SUSE's debug copy .gz), Image-VERSION (arm64 on SUSE).
	bootImagePrefixes := []string{"vmlinuz-", "vmlinux-", "Image-"}
	for _, e := range boot {
		name := e.Name()
		for _, p := range bootImagePrefixes {
			v, ok := strings.CutPrefix(name, p)
			if !ok || v == "" || strings.Contains(v, "-rescue-") {
				continue
			}
			v = strings.TrimSuffix(v, ".gz")
			if _, dup := found[v]; !dup {
				found[v] = path.Join("/boot", name)
			}
		}
	}
	// These prove that /lib/modules/VERSION belongs to an installed kernel:
	// its image (Fedora, RHEL, SUSE with usrmerge). Not the depmod index
	// (modules.dep): Debian's postinst writes it and only a purge removes
	// it, so a newer kernel removed with `apt remove` would be reported,
	// every cycle, as a reboot that can never boot it (seen in make
	// e2e-vm's VMs). A bare directory (DKMS, a stray module) does not count
	// either. Only where no /boot is there at all (a container given the
	// host's /lib/modules alone) is modules.dep the best proof left.
	moduleDirMarkers := []string{"vmlinuz", "vmlinux", "Image"}
	if boot == nil {
		moduleDirMarkers = append(moduleDirMarkers, "modules.dep")
	}
	for _, dir := range []string{"/lib/modules", "/usr/lib/modules"} {
		entries, err := readDir(env, dir)
		if err != nil {
			return nil, err
		}
		seenDir = seenDir || entries != nil
		for _, e := range entries {
			v := e.Name()
			if _, dup := found[v]; dup {
				continue
			}
			for _, m := range moduleDirMarkers {
				p := path.Join(dir, v, m)
				if real, err := env.resolve(p); err == nil {
					if _, err := os.Stat(real); err == nil {
						found[v] = p
						break
					}
				}
			}
		}
	}
	if len(found) == 0 {
		what := "no kernel image or module index"
		if !seenDir {
			what = "neither /boot nor /lib/modules"
		}
		return nil, fmt.Errorf("found %s%s; the kernel detector cannot compare (in a container, mount the host's /boot and /lib/modules and pass --root)", what, env.display(""))
	}
	return found, nil
}

// readDir lists dir under Root; a missing directory is nil, nil.
func readDir(env Env, dir string) ([]os.DirEntry, error) {
	real, err := env.resolve(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve %s: %w", env.display(dir), err)
	}
	entries, err := os.ReadDir(real)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot list %s: %w", env.display(dir), err)
	}
	if entries == nil {
		entries = []os.DirEntry{}
	}
	return entries, nil
}
