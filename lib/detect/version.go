package detect

import "strings"

// CompareVersions orders kernel release strings the way rpm's rpmvercmp
// orders versions (dpkg agrees on every kernel release seen in practice):
// the strings are split into runs of digits and runs of letters, other
// characters only separate runs; digit runs compare as numbers
// ("28" > "9"), letter runs as strings, and a digit run is newer than a
// letter run. When one string runs out first, the longer one is newer,
// except that "~" marks a pre-release that sorts before everything
// ("6.1~rc1" < "6.1"). It returns -1, 0 or +1.
//
//	CompareVersions("6.1.0-28-amd64", "6.1.0-9-amd64")                        == +1
//	CompareVersions("5.14.0-427.13.1.el9_4.x86_64", "5.14.0-362.8.1.el9_3.x86_64") == +1
//	CompareVersions("6.4.0-150600.23.25-default", "6.4.0-150600.23.7-default")   == +1
func CompareVersions(a, b string) int {
	for {
		a = trimSeparators(a)
		b = trimSeparators(b)
		// A tilde sorts before anything, even the end of the string.
		aTilde, bTilde := strings.HasPrefix(a, "~"), strings.HasPrefix(b, "~")
		switch {
		case aTilde && bTilde:
			a, b = a[1:], b[1:]
			continue
		case aTilde:
			return -1
		case bTilde:
			return +1
		}
		if a == "" || b == "" {
			switch {
			case a == b:
				return 0
			case a == "":
				return -1
			default:
				return +1
			}
		}
		aNum, bNum := isDigit(a[0]), isDigit(b[0])
		if aNum != bNum {
			if aNum {
				return +1
			}
			return -1
		}
		var sa, sb string
		if aNum {
			sa, a = span(a, isDigit)
			sb, b = span(b, isDigit)
			sa, sb = strings.TrimLeft(sa, "0"), strings.TrimLeft(sb, "0")
			if len(sa) != len(sb) {
				return cmpInt(len(sa), len(sb))
			}
		} else {
			sa, a = span(a, isAlpha)
			sb, b = span(b, isAlpha)
		}
		if c := strings.Compare(sa, sb); c != 0 {
			return c
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// trimSeparators drops leading characters that are neither digits, letters
// nor "~".
func trimSeparators(s string) string {
	i := 0
	for i < len(s) && !isDigit(s[i]) && !isAlpha(s[i]) && s[i] != '~' {
		i++
	}
	return s[i:]
}

func span(s string, in func(byte) bool) (string, string) {
	i := 0
	for i < len(s) && in(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return +1
	}
	return 0
}

// Flavor is the part of a kernel release that names the build rather than
// its version: "cloud-amd64" in 6.1.0-28-cloud-amd64 and in Debian's
// 6.12.48+deb13-cloud-amd64 (whose "+deb13" is part of the version, like a
// backport's "+bpo"), "default" in 6.4.0-150600.23.25-default, "generic" in
// 6.8.0-45-generic, "x86_64" in 5.14.0-427.13.1.el9_4.x86_64,
// "x86_64+debug" in ...x86_64+debug. Two flavors of one version installed
// side by side are not an upgrade of each other, so the kernel detector
// compares only within the running flavor.
func Flavor(release string) string {
	plus := ""
	if i := strings.IndexByte(release, '+'); i >= 0 {
		if j := strings.IndexByte(release[i:], '-'); j >= 0 {
			// A "+" before a dash is a local version (Debian's
			// +debNN, +bpo): drop it with the version.
			release = release[:i] + release[i+j:]
		} else {
			// A "+" at the end names a variant (Fedora's +debug).
			release, plus = release[:i], release[i:]
		}
	}
	parts := strings.Split(release, "-")
	i := 0
	for i < len(parts) && parts[i] != "" && isDigit(parts[i][0]) {
		i++
	}
	if i < len(parts) {
		return strings.Join(parts[i:], "-") + plus
	}
	// All dash-separated parts are versions (RHEL, Fedora): the
	// architecture is the last dotted element, when it is a word.
	last := parts[len(parts)-1]
	if j := strings.LastIndexByte(last, '.'); j >= 0 && j+1 < len(last) && isAlpha(last[j+1]) {
		return last[j+1:] + plus
	}
	return plus
}
