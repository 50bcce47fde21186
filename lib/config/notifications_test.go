package config

import (
	"strings"
	"testing"
)

func TestNotificationValidation(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string // substring of the error; "" = valid
	}{
		{"defaults", "notifications: {}\n", ""},
		{"every field", "notifications:\n  urls: [\"generic+http://127.0.0.1:9/hook\", \"slack://a/b/c\"]\n  webhooks: [\"https://hooks.example/x?token=s3cret\"]\n  events: [reboot_starting, paused]\n  templates:\n    reboot_starting: \"{{.Node}} reboots ({{.Reason}}) {{if .Duration}}{{.Duration}}{{end}}\"\n  timeout_sec: 2\n  blocked_after_sec: 60\n", ""},
		{"unknown event", "notifications:\n  events: [reboot_started]\n", `config.yaml:2: notifications.events[0]: "reboot_started" is not an event: use reboot_starting,`},
		{"template of an unknown event", "notifications:\n  templates:\n    rebooted: \"x\"\n", `notifications.templates.rebooted: "rebooted" is not an event`},
		{"template syntax", "notifications:\n  templates:\n    paused: \"{{.Node\"\n", "config.yaml:3: notifications.templates.paused: is not a Go template"},
		{"template unknown field", "notifications:\n  templates:\n    paused: \"{{.Nod}} {{with .Reason}}{{.Bogus}}{{end}}\"\n", "notifications.templates.paused: uses unknown field(s) .Nod, .Bogus: the fields are .Event,"},
		{"empty template", "notifications:\n  templates:\n    paused: \" \"\n", "notifications.templates.paused: is empty"},
		{"webhook scheme", "notifications:\n  webhooks: [\"ftp://user:s3cret@host/x\"]\n", "config.yaml:2: notifications.webhooks[0]: ftp://*** is not an http:// or https:// URL"},
		{"webhook without host", "notifications:\n  webhooks: [\"http:///x?token=s3cret\"]\n", "notifications.webhooks[0]: http:///*** is not an http:// or https:// URL with a host: missing host"},
		{"service url without scheme", "notifications:\n  urls: [\"s3cret@hooks.slack.com\"]\n", "notifications.urls[0]: *** is not a shoutrrr URL"},
		{"service url upper case", "notifications:\n  urls: [\"Slack://s3cret\"]\n", "the service \"Slack\" must be lower-case"},
		{"timeout zero", "notifications:\n  timeout_sec: 0\n", "notifications.timeout_sec: 0 must be 1 to 300 seconds"},
		{"timeout too long", "notifications:\n  timeout_sec: 301\n", "notifications.timeout_sec: 301 must be 1 to 300"},
		{"blocked after zero", "notifications:\n  blocked_after_sec: 0\n", "notifications.blocked_after_sec: must be a positive number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.body)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error containing %q", tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error prints the secret: %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\n does not contain %q", err, tt.want)
			}
		})
	}
}

func TestMaskURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://hooks.example:8443/services/T0/B0/s3cret", "https://hooks.example:8443/***"},
		{"http://user:s3cret@hooks.example/x", "http://***@hooks.example/***"},
		{"https://hooks.example?token=s3cret", "https://hooks.example/***"},
		{"https://hooks.example", "https://hooks.example"},
		{"generic+https://hooks.example/x?@token=s3cret", "generic+https://hooks.example/***"},
		{"generic://hooks.example/s3cret", "generic://hooks.example/***"},
		{"smtp://user:s3cret@mail.example:587/?from=a@b&to=c@d", "smtp://***@mail.example:587/***"},
		{"slack://s3cret-a/s3cret-b/s3cret-c", "slack://***"},
		{"telegram://s3cret@telegram?chats=@x", "telegram://***"},
		{"teams://s3cret@tenant/alt/owner?host=x.webhook.office.com", "teams://***"},
		{"discord://s3cret@1234", "discord://***"},
		{"s3cret", "***"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := MaskURL(tt.in)
			if got != tt.want {
				t.Errorf("MaskURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if strings.Contains(got, "s3cret") {
				t.Errorf("MaskURL(%q) = %q shows the secret", tt.in, got)
			}
		})
	}
}

// Webhooks are checked by the same code as the gate's and the silences'
// base URLs, with a query allowed (a token) and a port that must be a port.
func TestWebhookURLShape(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example.com/crd?token=x", true},
		{"http://127.0.0.1:8080/hook", true},
		{"http://[::1]:8080/hook", true},
		{"http://host:notaport/hook", false},
		{"http://host/hook#frag", false},
		{"ftp://host/hook", false},
		{"http:///hook", false},
	} {
		if err := checkHTTPURL(tc.url, true); (err == nil) != tc.ok {
			t.Errorf("checkHTTPURL(%q, true) = %v, want ok %v", tc.url, err, tc.ok)
		}
	}
	if checkHTTPURL("http://am:9093/?x=1", false) == nil {
		t.Error("a base URL with a query passed")
	}
}
