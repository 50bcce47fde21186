// Package fleetlock is a FleetLock server (the HTTP protocol Zincati and
// Flatcar's update agent speak, docs/fleetlock.md) backed by the lock's own
// seats and reboot slots (lib/lock, lib/slot): a FleetLock client's reboot
// is a reboot slot of the lock and group it asks for, counted by the same
// Count and taken by the same guarded Take as a clusterrebootd node's, so
// both kinds of node share one max_holders.
//
// The server keeps no state of its own: everything is in etcd, so several
// instances may answer behind one name.
package fleetlock

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
)

// The two operations, relative to the server's base URL.
const (
	PathPreReboot   = "/v1/pre-reboot"
	PathSteadyState = "/v1/steady-state"
)

// ProtocolHeader must be "true" on every request: a redirected or
// unintended request is refused.
const ProtocolHeader = "fleet-lock-protocol"

// The error kinds: a small fixed set, as the protocol asks (clients use the
// kind as a metrics label).
const (
	KindMethodNotAllowed = "method_not_allowed"
	KindNotFound         = "not_found"
	KindMissingHeader    = "missing_fleet_lock_header"
	KindInvalidBody      = "invalid_body"
	KindInvalidID        = "invalid_client_id"
	KindInvalidGroup     = "invalid_client_group"
	KindSemaphoreFull    = "failed_lock_semaphore_full"
	KindPaused           = "failed_lock_paused"
	KindPolicy           = "failed_lock_policy"
	KindHalted           = "failed_lock_halted"
	KindHeld             = "failed_lock_held"
	KindWave             = "failed_lock_wave"
	KindPaced            = "failed_lock_paced"
	KindWindow           = "failed_lock_window"
	KindIDMismatch       = "failed_lock_id_mismatch"
	KindIDConflict       = "failed_lock_id_conflict"
	KindEtcdUnavailable  = "etcd_unavailable"
	KindMisconfigured    = "server_misconfigured"
	KindInternal         = "internal_error"
)

// Error is a refusal as the protocol sends it: {"kind":..,"value":..} with
// an HTTP status.
type Error struct {
	Status int    `json:"-"`
	Kind   string `json:"kind"`
	Value  string `json:"value"`
}

func (e *Error) Error() string { return "fleetlock: " + e.Kind + ": " + e.Value }

func refuse(status int, kind, value string) *Error {
	return &Error{Status: status, Kind: kind, Value: value}
}

// Params are a request's client_params.
type Params struct {
	// ID is the client's identifier: its node name in etcd.
	ID string `json:"id"`
	// Group is the FleetLock group as sent.
	Group string `json:"group"`
}

// maxBody bounds a request body; a real one is under 200 bytes.
const maxBody = 16 << 10

// groupPattern is the protocol's rule for a group.
var groupPattern = regexp.MustCompile(`^[a-zA-Z0-9.-]+$`)

// ParseRequest checks a request's header and body: the protocol header,
// well-formed JSON with client_params, a usable id and a valid group.
func ParseRequest(r *http.Request) (Params, *Error) {
	if !strings.EqualFold(strings.TrimSpace(r.Header.Get(ProtocolHeader)), "true") {
		return Params{}, refuse(http.StatusBadRequest, KindMissingHeader, "the request lacks the header \"fleet-lock-protocol: true\"")
	}
	var body struct {
		ClientParams *Params `json:"client_params"`
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return Params{}, refuse(http.StatusBadRequest, KindInvalidBody, "cannot read the request body: "+err.Error())
	}
	if len(data) > maxBody {
		return Params{}, refuse(http.StatusBadRequest, KindInvalidBody, "the request body is larger than 16 KiB")
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return Params{}, refuse(http.StatusBadRequest, KindInvalidBody, "the body is not the FleetLock JSON object: "+oneLine(err))
	}
	if body.ClientParams == nil {
		return Params{}, refuse(http.StatusBadRequest, KindInvalidBody, "the body has no client_params object")
	}
	p := *body.ClientParams
	if err := CheckID(p.ID); err != nil {
		return p, refuse(http.StatusBadRequest, KindInvalidID, err.Error())
	}
	if err := CheckGroup(p.Group); err != nil {
		return p, refuse(http.StatusBadRequest, KindInvalidGroup, err.Error())
	}
	return p, nil
}

// CheckID accepts an id that can name a node in an etcd key, as node_name:
// 1 to 253 letters, digits, '.', '_' or '-', starting with a letter or digit.
func CheckID(id string) error {
	if id == "" {
		return errors.New("client_params.id is empty: it must name the client (node name or machine UUID)")
	}
	ok := len(id) <= 253
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		ok = alnum || i > 0 && (c == '.' || c == '_' || c == '-')
	}
	if !ok {
		return errors.New("client_params.id " + quote(id) + " cannot name a node: use 1 to 253 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	return nil
}

// CheckGroup accepts the protocol's groups (^[a-zA-Z0-9.-]+$) that are also
// usable as a lock group (at most 63 characters).
func CheckGroup(group string) error {
	if group == "" {
		return errors.New("client_params.group is empty: the protocol requires one (Zincati sends \"default\")")
	}
	if !groupPattern.MatchString(group) || !config.ValidGroup(group) {
		return errors.New("client_params.group " + quote(group) + " is not a valid group: use 1 to 63 letters, digits, '.' or '-'")
	}
	return nil
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	b, _ := json.Marshal(strings.ToValidUTF8(s, "?"))
	return string(b)
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// Route maps a request path to its operation: the path with repeated
// slashes collapsed ("//v1/pre-reboot", as a base URL joined with "/"
// gives) must be one of the two paths. It returns "" for anything else.
func Route(path string) string {
	for strings.Contains(path, "//") {
		path = strings.ReplaceAll(path, "//", "/")
	}
	switch path {
	case PathPreReboot, PathSteadyState:
		return path
	}
	return ""
}
