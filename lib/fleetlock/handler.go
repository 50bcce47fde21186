package fleetlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Answer is the JSON body of a 200: clients only look at the status, but
// some accept a 200 only with a JSON body.
type Answer struct {
	Result Result `json:"result"`
	ID     string `json:"id"`
	Group  string `json:"group"`
}

// requestTimeout bounds one request beyond the seat's wait.
const requestTimeout = 30 * time.Second

// ServeHTTP answers POST /v1/pre-reboot and POST /v1/steady-state (repeated
// slashes allowed); anything else is 404, a method other than POST 405.
// Every answer is JSON; every request is logged with its api, status and
// kind.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	api := Route(r.URL.Path)
	var (
		res    Result
		params Params
		err    error
	)
	switch {
	case api == "":
		err = refuse(http.StatusNotFound, KindNotFound, "no such FleetLock endpoint: use POST "+PathPreReboot+" or "+PathSteadyState)
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		err = refuse(http.StatusMethodNotAllowed, KindMethodNotAllowed, "FleetLock requests are POST, not "+r.Method)
	default:
		var perr *Error
		if params, perr = ParseRequest(r); perr != nil {
			err = perr
			break
		}
		if perr := s.identity(r, params.ID); perr != nil {
			err = perr
			break
		}
		timeout := s.SeatTimeout + requestTimeout
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		if api == PathPreReboot {
			res, err = s.PreReboot(ctx, params.ID, params.Group)
		} else {
			res, err = s.SteadyState(ctx, params.ID, params.Group)
		}
		cancel()
	}
	w.Header().Set("Content-Type", "application/json")
	var fe *Error
	switch {
	case err == nil:
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(Answer{Result: res, ID: params.ID, Group: params.Group})
		s.Log.Info("fleetlock request", "api", apiName(api), "id", params.ID, "group", params.Group, "status", http.StatusOK, "result", string(res), "remote", r.RemoteAddr)
		return
	case !errors.As(err, &fe):
		fe = refuse(http.StatusInternalServerError, KindInternal, oneLine(err))
	}
	w.WriteHeader(fe.Status)
	_ = json.NewEncoder(w).Encode(fe)
	level := s.Log.Info
	if fe.Status >= 500 {
		level = s.Log.Warn
	}
	level("fleetlock request refused", "api", apiName(api), "id", params.ID, "group", params.Group, "status", fe.Status, "kind", fe.Kind, "value", fe.Value, "remote", r.RemoteAddr)
}

func apiName(api string) string {
	switch api {
	case PathPreReboot:
		return "pre_reboot"
	case PathSteadyState:
		return "steady_state"
	}
	return "unknown"
}

// identity refuses a request whose client certificate does not name the
// client it asks for (ClientIdentity): with client certificates, a node
// can take and free only its own slot.
func (s *Server) identity(r *http.Request, id string) *Error {
	if s.ClientIdentity == "" || s.ClientIdentity == IdentityNone {
		return nil
	}
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return refuse(http.StatusForbidden, KindIDMismatch, "a client certificate is required and names the client's id")
	}
	cert := r.TLS.PeerCertificates[0]
	switch s.ClientIdentity {
	case IdentityCN:
		if cert.Subject.CommonName == id {
			return nil
		}
		return refuse(http.StatusForbidden, KindIDMismatch, fmt.Sprintf("the client certificate's common name %q is not the id %q it asks for", cert.Subject.CommonName, id))
	case IdentityDNS:
		for _, n := range cert.DNSNames {
			if n == id {
				return nil
			}
		}
		return refuse(http.StatusForbidden, KindIDMismatch, fmt.Sprintf("no DNS name of the client certificate (%s) is the id %q it asks for", strings.Join(cert.DNSNames, ", "), id))
	}
	return refuse(http.StatusInternalServerError, KindMisconfigured, "unknown client identity "+s.ClientIdentity)
}
