package clusterrebootd

import (
	"context"
	"io"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
)

// notifications.urls are checked by the crd-lock child (driver/notifycheck.go),
// which links shoutrrr: at validate-config, at the daemon's start and at each
// reload, only when there are any. A URL shoutrrr cannot use is a
// configuration error (exit 2); at a reload the running configuration stays.

// checkedChild is the daemon's child, once it found cfg's notifications.urls
// usable.
func (b *base) checkedChild(ctx context.Context, stderr io.Writer, cfg config.Config) (driver.Child, error) {
	child, err := b.child(stderr, false)
	if err == nil {
		err = driver.CheckNotificationsConfig(ctx, child, cfg, b.c.ConfigPath)
	}
	return child, err
}

// checkedLoad is the reload's load: the configuration read and validated
// again, its notifications.urls checked by child.
func (b *base) checkedLoad(ctx context.Context, override func(*config.Config), child driver.Child) func() (config.Config, error) {
	return func() (config.Config, error) {
		cfg, err := b.load(override)
		if err == nil {
			err = driver.CheckNotificationsConfig(ctx, child, cfg, b.c.ConfigPath)
		}
		return cfg, err
	}
}

// notificationProblems is validate-config's check of notifications.urls,
// skipped when the section has a problem already.
func (b *base) notificationProblems(cfg config.Config, probs []config.Problem, stderr io.Writer) []config.Problem {
	if len(cfg.Notifications.URLs) == 0 || hasProblem(probs, "notifications") {
		return nil
	}
	child, err := b.child(stderr, true)
	var found []config.Problem
	if err == nil {
		found, err = driver.CheckNotifications(context.Background(), child, cfg)
	}
	if err != nil {
		return []config.Problem{{Field: "notifications.urls", Where: cfg.Where("notifications.urls"),
			Message: "cannot be checked: " + err.Error()}}
	}
	return found
}
