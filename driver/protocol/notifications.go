package protocol

// NotificationDelivery is one notification to one destination, as a step
// reports it (lib/notifications.Delivery in JSON; this package links no
// network code).
type NotificationDelivery struct {
	Event string `json:"event"`
	// Destination is the URL masked (config.MaskURL): never a secret.
	Destination string `json:"destination"`
	Error       string `json:"error,omitempty"`
}

// Notifications is what a step's notifications became (docs/notifications.md).
type Notifications struct {
	Sent   []NotificationDelivery `json:"sent,omitempty"`
	Failed []NotificationDelivery `json:"failed,omitempty"`
}
