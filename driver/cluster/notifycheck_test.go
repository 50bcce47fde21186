package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// `step check-notifications`: shoutrrr parses each URL (nothing is sent, no
// etcd is needed); a bad one is exit 2 naming the first, masked; the JSON
// lists every URL with its problem.
func TestStepCheckNotifications(t *testing.T) {
	for _, tc := range []struct {
		name  string
		urls  []string
		code  exitcode.Code
		error string   // piece of the error line
		probs []string // problem of each URL, "" for none
	}{
		{"usable", []string{"generic://127.0.0.1:1/x", "ntfy://ntfy.sh/s3crettopic"}, exitcode.OK, "", []string{"", ""}},
		{"unknown service", []string{"slak://x@s3cret", "generic://127.0.0.1:1/x"}, exitcode.Config,
			`notifications.urls[0]: slak://***: shoutrrr knows no service "slak"`, []string{"knows no service", ""}},
		{"two bad", []string{"generic://127.0.0.1:1/x", "slack://xoxb-s3cret@C0123", "discord://s3crettoken@"}, exitcode.Config,
			"notifications.urls[1]: slack://***: the slack service refuses it: invalid slack token format (and 1 more)", []string{"", "slack token", "discord service refuses"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.NodeName = "n1"
			cfg.Notifications.URLs = tc.urls
			req, err := protocol.NewRequest(protocol.StepCheckNotifications, nil, &cfg)
			if err != nil {
				t.Fatal(err)
			}
			in, err := req.Encode()
			if err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			err = runStep(context.Background(), []string{protocol.StepCheckNotifications}, bytes.NewReader(in), &out, &errb, realWorld())
			if got := exitcode.CodeOf(err); got != tc.code {
				t.Fatalf("code %d (%v), want %d", got, err, tc.code)
			}
			if tc.error != "" && (err == nil || !strings.Contains(err.Error(), tc.error)) {
				t.Errorf("error %v, want %q", err, tc.error)
			}
			var res protocol.CheckNotificationsResult
			if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Tool != Tool {
				t.Fatalf("stdout is not one JSON result: %q", out.String())
			}
			if len(res.URLs) != len(tc.probs) {
				t.Fatalf("urls %+v", res.URLs)
			}
			for i, want := range tc.probs {
				u := res.URLs[i]
				if (want == "") != (u.Problem == "") || !strings.Contains(u.Problem, want) || u.URL != config.MaskURL(tc.urls[i]) {
					t.Errorf("urls[%d] = %+v, want problem %q", i, u, want)
				}
			}
			if strings.Contains(out.String()+errb.String(), "s3cret") {
				t.Errorf("a secret is shown: %s %s", out.String(), errb.String())
			}
		})
	}
}
