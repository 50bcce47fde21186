package notifications

import (
	"strings"
	"testing"
)

// CheckURL: shoutrrr's own parsing, nothing sent, no secret in the error.
func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		want      string // "" when valid; else a piece of the error
	}{
		{"generic", "generic://127.0.0.1:1/x", ""},
		{"generic with a scheme", "generic+https://hooks.example.com/p?token=s3cret", ""},
		{"smtp", "smtp://crd:s3cretpw@mail.example.com:587/?from=crd@example.com&to=ops@example.com", ""},
		{"ntfy", "ntfy://ntfy.sh/s3crettopic", ""},
		// matrix logs in when initialised: only its URL is read, no host contacted.
		{"matrix without contacting it", "matrix://crd:s3cretpw@matrix.invalid", ""},
		{"unknown service", "slak://x@y", `shoutrrr knows no service "slak": use one of`},
		{"slack token malformed", "slack://xoxb-s3cret@C0123456", "the slack service refuses it: invalid slack token format"},
		{"smtp without from", "smtp://crd:s3cretpw@mail.example.com:587", "the smtp service refuses it"},
		{"discord without webhook id", "discord://s3crettoken@", "the discord service refuses it"},
		{"not a URL", "generic://h/%zz", "shoutrrr cannot parse it as a URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckURL(tc.url)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckURL(%q) = %v, want valid", tc.url, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckURL(%q) = %v, want %q", tc.url, err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}
