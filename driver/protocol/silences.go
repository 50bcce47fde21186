package protocol

// SilenceReport is what a cluster step did with this node's Alertmanager
// silences (docs/silences.md): the cycle creates them when it takes the
// reboot slot, complete expires them after the boot.
type SilenceReport struct {
	// IDs are the silences this node holds after the step, one per
	// Alertmanager that answered.
	IDs []string `json:"ids,omitempty"`
	// Expired counts the silences complete expired.
	Expired int `json:"expired,omitempty"`
	// CreateFailures and ExpireFailures count the Alertmanagers that could
	// not create (or extend) and expire the silence; Errors says why, one
	// line each, passwords masked.
	CreateFailures int      `json:"create_failures,omitempty"`
	ExpireFailures int      `json:"expire_failures,omitempty"`
	Errors         []string `json:"errors,omitempty"`
}

// Silence operations, the op label of clusterrebootd_silence_failures_total.
const (
	SilenceOpCreate = "create"
	SilenceOpExpire = "expire"
)
