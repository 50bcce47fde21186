package cluster

import (
	"fmt"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/notifications"
)

// checkNotifications is `step check-notifications`: shoutrrr parses every
// notifications.urls entry, nothing is sent and no etcd is needed. A URL it
// cannot use is a configuration error (exit 2) naming the first, masked.
func checkNotifications(cfg config.Config, res *protocol.CheckNotificationsResult) error {
	res.URLs = []protocol.URLCheck{}
	var first *protocol.URLCheck
	bad := 0
	for i, u := range cfg.Notifications.URLs {
		c := protocol.URLCheck{Field: fmt.Sprintf("notifications.urls[%d]", i), URL: config.MaskURL(u)}
		if err := notifications.CheckURL(u); err != nil {
			c.Problem = err.Error()
			bad++
		}
		res.URLs = append(res.URLs, c)
		if c.Problem != "" && first == nil {
			first = &res.URLs[len(res.URLs)-1]
		}
	}
	if first == nil {
		return nil
	}
	more := ""
	if bad > 1 {
		more = fmt.Sprintf(" (and %d more)", bad-1)
	}
	return exitcode.Errorf(exitcode.Config, "crd-lock step %s: %s: %s: %s%s", protocol.StepCheckNotifications, first.Field, first.URL, first.Problem, more)
}
