package detect

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
)

// Families the auto preset knows.
const (
	FamilyDebian = "debian"
	FamilyRHEL   = "rhel"
	FamilySUSE   = "suse"
)

// Markers and commands the auto preset uses.
const (
	DebianMarker = "/var/run/reboot-required"
	SUSEMarker   = "/run/reboot-needed"
)

// OSRelease is what the auto preset reads from /etc/os-release.
type OSRelease struct {
	ID     string
	IDLike []string
}

// Family maps ID, then each ID_LIKE entry, to debian, rhel or suse; "" when
// none is known.
func (o OSRelease) Family() string {
	for _, id := range append([]string{o.ID}, o.IDLike...) {
		switch id = strings.ToLower(id); {
		case id == "debian" || id == "ubuntu":
			return FamilyDebian
		case id == "rhel" || id == "fedora" || id == "centos" || id == "almalinux" || id == "rocky":
			return FamilyRHEL
		case id == "suse" || id == "sles" || strings.HasPrefix(id, "opensuse") || strings.HasPrefix(id, "sle-"):
			return FamilySUSE
		}
	}
	return ""
}

// ReadOSRelease reads /etc/os-release under env's Root, falling back to
// /usr/lib/os-release as os-release(5) says.
func ReadOSRelease(env Env) (OSRelease, error) {
	var lastErr error
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		real, err := env.resolve(p)
		if err != nil {
			return OSRelease{}, fmt.Errorf("cannot resolve %s: %w", env.display(p), err)
		}
		data, err := os.ReadFile(real)
		if errors.Is(err, fs.ErrNotExist) {
			lastErr = err
			continue
		}
		if err != nil {
			return OSRelease{}, fmt.Errorf("cannot read %s: %w", env.display(p), err)
		}
		return parseOSRelease(string(data)), nil
	}
	return OSRelease{}, fmt.Errorf("neither /etc/os-release nor /usr/lib/os-release exists%s (%v)", env.display(""), lastErr)
}

// parseOSRelease reads KEY=VALUE lines; values may be quoted.
func parseOSRelease(data string) OSRelease {
	var o OSRelease
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		key, val, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if len(val) >= 2 && (val[0] == '"' || val[0] == '\'') && val[len(val)-1] == val[0] {
			if uq, err := strconv.Unquote(`"` + val[1:len(val)-1] + `"`); err == nil {
				val = uq
			} else {
				val = val[1 : len(val)-1]
			}
		}
		switch key {
		case "ID":
			o.ID = val
		case "ID_LIKE":
			o.IDLike = strings.Fields(val)
		}
	}
	return o
}

// auto picks the distribution's own detectors by /etc/os-release on every
// check (an in-place upgrade may change the answer):
// Debian/Ubuntu the file /var/run/reboot-required; the RHEL family
// `needs-restarting -r` (1 needed, 0 not); SUSE `zypper needs-rebooting`
// (102 needed, 0 not) and the file /run/reboot-needed.
type auto struct {
	name    string
	timeout time.Duration
	env     Env
}

func (a *auto) Name() string { return a.name }
func (a *auto) Type() string { return detectspec.TypeAuto }

func (a *auto) Detect(ctx context.Context) Result {
	start := time.Now()
	r := a.check(ctx)
	r.Name, r.Type = a.name, detectspec.TypeAuto
	r.DurationMS = since(start)
	return r
}

func (a *auto) command(argv []string, needed int) *commandDetector {
	return &commandDetector{argv: argv, needed: []int{needed}, notNeeded: []int{0}, timeout: a.timeout, env: a.env}
}

func (a *auto) check(ctx context.Context) Result {
	osr, err := ReadOSRelease(a.env)
	if err != nil {
		return Result{Err: "auto: " + err.Error() + "; configure reboot_required_detectors explicitly"}
	}
	what := fmt.Sprintf("os-release ID=%s", osr.ID)
	if len(osr.IDLike) > 0 {
		what += fmt.Sprintf(" ID_LIKE=%q", strings.Join(osr.IDLike, " "))
	}
	var parts []Result
	switch osr.Family() {
	case FamilyDebian:
		parts = append(parts, checkFile(a.env, DebianMarker))
	case FamilyRHEL:
		r := a.command([]string{"needs-restarting", "-r"}, 1).run(ctx)
		if r.Err != "" && strings.Contains(r.Err, "not found") {
			r.Err += " (it is in dnf-utils/yum-utils; on dnf5 use a command detector with cmd [dnf, needs-restarting, -r])"
		}
		parts = append(parts, r)
	case FamilySUSE:
		parts = append(parts,
			a.command([]string{"zypper", "needs-rebooting"}, 102).run(ctx),
			checkFile(a.env, SUSEMarker))
	default:
		return Result{Err: fmt.Sprintf("auto: %s is not a distribution the auto detector knows (debian, ubuntu, rhel, fedora, centos, almalinux, rocky, suse, opensuse, sles); configure reboot_required_detectors explicitly (type file or command)", what)}
	}
	return combine(what, parts)
}

// combine merges sub-results: an error if any failed, required if any said
// so, details joined.
func combine(prefix string, parts []Result) Result {
	var out Result
	var details, errs []string
	for _, p := range parts {
		if p.Err != "" {
			errs = append(errs, p.Err)
			continue
		}
		out.Required = out.Required || p.Required
		out.Packages = append(out.Packages, p.Packages...)
		details = append(details, p.Detail)
	}
	if len(errs) > 0 {
		out.Required = false
		out.Packages = nil
		out.Err = prefix + ": " + strings.Join(errs, "; ")
		return out
	}
	out.Detail = prefix + ": " + strings.Join(details, "; ")
	return out
}
