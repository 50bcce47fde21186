package detect

import "testing"

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want int
	}{
		{"debian abi number is numeric", "6.1.0-28-amd64", "6.1.0-9-amd64", +1},
		{"debian equal", "6.1.0-28-amd64", "6.1.0-28-amd64", 0},
		{"debian older", "6.1.0-9-amd64", "6.1.0-28-amd64", -1},
		{"debian 12 to the 6.12 backport", "6.12.117+deb12-cloud-amd64", "6.1.0-57-cloud-amd64", +1},
		{"debian 13 point release", "6.12.57+deb13-amd64", "6.12.48+deb13-amd64", +1},
		{"rhel minor release", "5.14.0-427.13.1.el9_4.x86_64", "5.14.0-362.24.1.el9_3.x86_64", +1},
		{"rhel z-stream", "5.14.0-427.13.1.el9_4.x86_64", "5.14.0-427.9.1.el9_4.x86_64", +1},
		{"rhel dist tag", "5.14.0-427.13.1.el9_4.x86_64", "5.14.0-427.13.1.el9_3.x86_64", +1},
		{"suse", "6.4.0-150600.23.25-default", "6.4.0-150600.23.7-default", +1},
		{"suse service pack", "6.4.0-150600.23.7-default", "5.14.21-150500.55.68-default", +1},
		{"upstream minor 10 > 9", "6.10.0", "6.9.12", +1},
		{"leading zeros", "6.01", "6.1", 0},
		{"more segments is newer", "6.1.0-1", "6.1.0", +1},
		{"shorter is older", "6.1", "6.1.0", -1},
		{"tilde is a pre-release", "6.1~rc1", "6.1", -1},
		{"tilde on both sides", "6.1~rc2", "6.1~rc1", +1},
		{"tilde on the right", "6.1", "6.1~rc1", +1},
		{"digits newer than letters", "6.1.0-1", "6.1.0-a", +1},
		{"letters older than digits", "6.1.0-a", "6.1.0-1", -1},
		{"letters compare as strings", "6.1.0-b", "6.1.0-a", +1},
		{"separators do not matter", "6.1.0_28", "6.1.0-28", 0},
		{"empty strings", "", "", 0},
		{"empty is older", "", "1", -1},
		{"huge numbers", "99999999999999999999999", "9", +1},
		{"ubuntu", "6.8.0-45-generic", "6.8.0-101-generic", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CompareVersions(tt.a, tt.b); got != tt.want {
				t.Errorf("CompareVersions(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
			if got := CompareVersions(tt.b, tt.a); got != -tt.want {
				t.Errorf("CompareVersions(%q, %q) = %d, want %d (antisymmetry)", tt.b, tt.a, got, -tt.want)
			}
		})
	}
}

func TestFlavor(t *testing.T) {
	tests := []struct{ release, want string }{
		{"6.1.0-28-amd64", "amd64"},
		{"6.1.0-28-cloud-amd64", "cloud-amd64"},
		{"6.1.0-28-rt-amd64", "rt-amd64"},
		// Debian 13 and the bookworm backports put "+debNN" or "+bpo"
		// into the version: the flavor is what follows the dash.
		{"6.12.48+deb13-amd64", "amd64"},
		{"6.12.48+deb13-rt-amd64", "rt-amd64"},
		{"6.12.117+deb12-cloud-amd64", "cloud-amd64"},
		{"6.12.12+bpo-cloud-amd64", "cloud-amd64"},
		{"6.8.0-45-generic", "generic"},
		{"6.8.0-1015-aws", "aws"},
		{"6.4.0-150600.23.25-default", "default"},
		{"5.14.0-427.13.1.el9_4.x86_64", "x86_64"},
		{"5.14.0-427.13.1.el9_4.x86_64+debug", "x86_64+debug"},
		{"6.8.5-301.fc40.aarch64", "aarch64"},
		{"6.9.0", ""},
		{"6.9.0+", "+"},
		{"6.9.0-custom", "custom"},
		{"0-rescue-0123abcd", "rescue-0123abcd"},
	}
	for _, tt := range tests {
		t.Run(tt.release, func(t *testing.T) {
			if got := Flavor(tt.release); got != tt.want {
				t.Errorf("Flavor(%q) = %q, want %q", tt.release, got, tt.want)
			}
		})
	}
}
