package driver

import (
	"context"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// CheckNotificationsConfig, what validate-config, the daemon's start and
// its reload call: the child only with urls, and then only the URLs of the
// configuration; a bad URL is the config error of the file, exit 2, naming
// the field and its file. (The child's side: driver/cluster
// TestStepCheckNotifications; both through the binaries:
// testscripts/clusterrebootd_validate_notifications.txtar.)
func TestCheckNotificationsConfig(t *testing.T) {
	child := &fakeChild{answers: map[string]answer{}}
	cfg := config.Default()
	cfg.NodeName = "n1"
	cfg.Notifications.Webhooks = []string{"http://127.0.0.1:1/x"}
	if err := CheckNotificationsConfig(context.Background(), child, cfg, "/etc/crd.yaml"); err != nil || len(child.steps()) != 0 {
		t.Fatalf("webhooks only: %v, child ran %v (want nothing)", err, child.steps())
	}
	cfg.Notifications.URLs = []string{"generic://127.0.0.1:1/x"}
	cfg.RebootSlotTTLSec = 1
	child.answers[protocol.StepCheckNotifications] = answer{json: `{"tool":"crd-lock","exit_code":0,"urls":[{"field":"notifications.urls[0]","url":"generic://127.0.0.1:1/x"}]}`}
	if err := CheckNotificationsConfig(context.Background(), child, cfg, "/etc/crd.yaml"); err != nil || len(child.steps()) != 1 {
		t.Fatalf("a usable URL: %v, child ran %v", err, child.steps())
	}
	if got := child.cfgs[0]; got.NodeName != probeNode || got.RebootSlotTTLSec == 1 || len(got.Notifications.URLs) != 1 || len(got.Notifications.Webhooks) != 0 {
		t.Errorf("the child got %+v, want only the URLs", got)
	}
	child.answers[protocol.StepCheckNotifications] = answer{code: exitcode.Config, json: `{"tool":"crd-lock","exit_code":2,"urls":[{"field":"notifications.urls[0]","url":"generic://127.0.0.1:1/x"},` +
		`{"field":"notifications.urls[1]","url":"slak://***","problem":"shoutrrr knows no service \"slak\""}]}`}
	cfg.Notifications.URLs = append(cfg.Notifications.URLs, "slak://x@s3cret")
	err := CheckNotificationsConfig(context.Background(), child, cfg, "/etc/crd.yaml")
	want := `config /etc/crd.yaml: notifications.urls[1]: slak://***: shoutrrr knows no service "slak"`
	if exitcode.CodeOf(err) != exitcode.Config || err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("a bad URL: %v (code %d), want exit 2 and %q", err, exitcode.CodeOf(err), want)
	}
}
