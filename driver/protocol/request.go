package protocol

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Version is the step protocol's version, written in every Request. A child
// refuses a request of another version (exit 70: its cycles end with reason
// internal, and nothing reboots). The daemon and crd-lock ship in one
// package, but the package does not restart a running daemon: after an
// upgrade the old daemon runs with the new crd-lock until it is restarted
// or reboots. So whoever raises Version keeps the child accepting the
// version before it, as the by-hand path (flags and YAML) serves the
// daemons from before the request.
const Version = 1

// Request is the one document the daemon writes on a child's stdin: which
// step, its arguments, and the daemon's effective configuration. The
// daemon validated that configuration when it loaded it; the child does not
// validate it again (it checks Protocol). One JSON object; serve-metrics
// keeps reading its stdin after it, as the daemon's liveness pipe.
//
// By hand, `crd-lock step NAME [flags] < config.yaml` still works: a
// stdin that is not a Request is a YAML configuration, validated, and the
// arguments are flags (docs/cluster-protocol.md).
type Request struct {
	// Protocol is Version of the daemon that wrote the request.
	Protocol int `json:"protocol"`
	// Step is the step's name, one of Steps(); the daemon passes it as
	// crd-lock's argument too, so that ps and the journal show it.
	Step string `json:"step"`
	// Args are the step's arguments, one of the *Args types as JSON (absent
	// for a step without any).
	Args json.RawMessage `json:"args,omitempty"`
	// Config is the daemon's effective configuration (absent for
	// serve-metrics, which needs none).
	Config *config.Config `json:"config,omitempty"`
	// Root is the daemon's --root: the child reads the same boot id and
	// detector files (tests, containers).
	Root string `json:"root,omitempty"`
	// LogLevel and LogFormat make the child's lines on the shared stderr
	// (the journal) look like the daemon's and follow its level.
	LogLevel  string `json:"log_level,omitempty"`
	LogFormat string `json:"log_format,omitempty"`
}

// NewRequest is the request of step with args (nil: none) and cfg (nil:
// none).
func NewRequest(step string, args any, cfg *config.Config) (Request, error) {
	r := Request{Protocol: Version, Step: step, Config: cfg}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return r, exitcode.Errorf(exitcode.Internal, "protocol: encode the arguments of step %s: %w", step, err)
		}
		r.Args = b
	}
	return r, nil
}

// Encode is the request as the child reads it: one JSON object and a
// newline.
func (r Request) Encode() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, exitcode.Errorf(exitcode.Internal, "protocol: encode the request of step %s: %w", r.Step, err)
	}
	return append(b, '\n'), nil
}

// IsRequest reports whether data (a child's stdin, or its start) is a
// Request rather than a YAML configuration given by hand: a JSON object,
// the only form the daemon writes. A configuration written in YAML's flow
// style ({node_name: …}) is not one.
func IsRequest(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '{'
}

// DecodeArgs decodes the request's arguments into args (a pointer to the
// step's *Args, holding its defaults); absent arguments keep them.
func (r Request) DecodeArgs(args any) error {
	if len(r.Args) == 0 || args == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(r.Args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(args); err != nil {
		return exitcode.Errorf(exitcode.Internal, "crd-lock step %s: the daemon's arguments do not decode: %v", r.Step, err)
	}
	return nil
}

// Check refuses a request the child cannot act on: another protocol
// version, or another step than the one named on the command line.
func (r Request) Check(step string) error {
	if r.Protocol != Version {
		return exitcode.Errorf(exitcode.Internal, "crd-lock step %s: the request on stdin is of step protocol %d, this crd-lock speaks %d: restart clusterrebootd after an upgrade (systemctl restart clusterrebootd)", step, r.Protocol, Version)
	}
	if r.Step != step {
		return exitcode.Errorf(exitcode.Internal, "crd-lock step %s: the request on stdin is for step %q", step, r.Step)
	}
	return nil
}

// Seconds is t as the arguments carry times: whole seconds in UTC (zero
// stays zero), as the health records and failure keys the child writes
// from them have always had them.
func Seconds(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Second)
}
