package driver

import (
	"context"
	"fmt"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// probeNode is the node name of the configuration the check passes: the
// step needs only the URLs, and must not fail over another field.
const probeNode = "check-notifications"

// CheckNotifications runs the child's check when cfg has notifications.urls
// and returns what it found wrong, one problem per URL (with file:line
// from cfg). err says the child gave no answer.
func CheckNotifications(ctx context.Context, child Child, cfg config.Config) ([]config.Problem, error) {
	if len(cfg.Notifications.URLs) == 0 {
		return nil, nil
	}
	probe := config.Default()
	probe.NodeName = probeNode
	probe.Notifications.URLs = cfg.Notifications.URLs
	var res protocol.CheckNotificationsResult
	code, err := child.Run(ctx, protocol.StepCheckNotifications, nil, probe, &res)
	if err != nil {
		return nil, err
	}
	var probs []config.Problem
	for _, u := range res.URLs {
		if u.Problem != "" {
			probs = append(probs, config.Problem{Field: u.Field, Where: cfg.Where(u.Field), Message: fmt.Sprintf("%s: %s", u.URL, u.Problem)})
		}
	}
	if len(probs) == 0 && code != exitcode.OK {
		return nil, exitcode.Errorf(code, "driver: crd-lock step %s: %s", protocol.StepCheckNotifications, res.Error)
	}
	return probs, nil
}

// CheckNotificationsConfig is CheckNotifications as the configuration error
// of source (exit 2, the first problem on one line), nil when every URL is
// usable.
func CheckNotificationsConfig(ctx context.Context, child Child, cfg config.Config, source string) error {
	probs, err := CheckNotifications(ctx, child, cfg)
	if err != nil || len(probs) == 0 {
		return err
	}
	return exitcode.New(exitcode.Config, &config.ValidationError{Source: source, Problems: probs})
}
