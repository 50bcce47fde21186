package protocol

import "github.com/clusterrebootd/clusterrebootd/lib/report"

// Whether shoutrrr knows a notifications.urls service, and whether the URL
// is well formed for it, only code that links shoutrrr can tell: the
// daemon links none (docs/architecture.md), so validate-config, the
// daemon's start and its reload ask the child, `crd-lock step
// check-notifications`, and only when notifications.urls is not empty.

// CheckNotificationsResult is the JSON of `step check-notifications`.
type CheckNotificationsResult struct {
	report.Header
	// URLs are notifications.urls in order, each masked (config.MaskURL)
	// with what shoutrrr found wrong ("" when it accepts it).
	URLs []URLCheck `json:"urls"`
}

// URLCheck is one notifications.urls entry checked.
type URLCheck struct {
	// Field is notifications.urls[i].
	Field string `json:"field"`
	// URL is the URL masked: never a secret.
	URL     string `json:"url"`
	Problem string `json:"problem,omitempty"`
}
