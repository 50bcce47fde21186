// Package silence creates, reads and expires Alertmanager silences through
// Alertmanager's documented v2 HTTP API (POST /api/v2/silences, GET and
// DELETE /api/v2/silence/{id}), with net/http and encoding/json.
//
// It runs in the cluster child (crd-lock), which links net/http anyway, never
// in the lean daemon. Every message names the Alertmanager by its URL with
// the password masked (config.RedactURL).
package silence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/silence/matcher"
)

// Silence is a silence as the v2 API reads and writes it.
type Silence struct {
	ID        string            `json:"id,omitempty"`
	Matchers  []matcher.Matcher `json:"matchers"`
	StartsAt  time.Time         `json:"startsAt"`
	EndsAt    time.Time         `json:"endsAt"`
	CreatedBy string            `json:"createdBy"`
	Comment   string            `json:"comment"`
	// Status is set by Alertmanager on a read.
	Status *Status `json:"status,omitempty"`
}

// Status is a silence's state: active, pending or expired.
type Status struct {
	State string `json:"state"`
}

// Silence states.
const (
	StateActive  = "active"
	StatePending = "pending"
	StateExpired = "expired"
)

// Live reports whether the silence is active or pending (not expired).
func (s Silence) Live() bool { return s.Status == nil || s.Status.State != StateExpired }

// ErrNotFound: the Alertmanager knows no silence of that ID (never created
// there, or garbage-collected after its retention).
var ErrNotFound = errors.New("silence: not found")

// Client talks to one Alertmanager.
type Client struct {
	// URL is the Alertmanager's base URL, possibly with user:password and a
	// path prefix.
	URL string
	// HTTP is the client (nil: a plain one); Timeout bounds each request.
	HTTP    *http.Client
	Timeout time.Duration
}

// Name is the URL with its password masked, for messages.
func (c Client) Name() string { return config.RedactURL(c.URL) }

// Create posts s (with s.ID: an update, which Alertmanager may answer with
// a new ID when the change would rewrite history) and returns its ID.
func (c Client) Create(ctx context.Context, s Silence) (string, error) {
	s.Status = nil
	body, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("silence: %w", err)
	}
	var out struct {
		SilenceID string `json:"silenceID"`
	}
	if err := c.do(ctx, http.MethodPost, "silences", body, &out); err != nil {
		return "", err
	}
	if out.SilenceID == "" {
		return "", fmt.Errorf("silence: %s answered POST /api/v2/silences without a silenceID", c.Name())
	}
	return out.SilenceID, nil
}

// Get reads one silence; ErrNotFound when there is none of that ID.
func (c Client) Get(ctx context.Context, id string) (Silence, error) {
	var s Silence
	err := c.do(ctx, http.MethodGet, "silence/"+url.PathEscape(id), nil, &s)
	return s, err
}

// List reads every silence the Alertmanager holds (expired ones included,
// until its retention ends).
func (c Client) List(ctx context.Context) ([]Silence, error) {
	var out []Silence
	err := c.do(ctx, http.MethodGet, "silences", nil, &out)
	return out, err
}

// Expire ends the silence now. One that is gone or already expired is fine:
// either way it silences nothing any more.
func (c Client) Expire(ctx context.Context, id string) error {
	err := c.do(ctx, http.MethodDelete, "silence/"+url.PathEscape(id), nil, nil)
	if errors.Is(err, ErrNotFound) || errors.Is(err, errAlreadyExpired) {
		return nil
	}
	return err
}

var errAlreadyExpired = errors.New("silence: already expired")

// do sends one request to <URL>/api/v2/<path> and decodes a JSON answer
// into out (when not nil).
func (c Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("silence: %q is not an http:// or https:// Alertmanager URL", c.Name())
	}
	user := u.User
	u.User = nil
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v2/" + path
	u.RawPath = ""
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("silence: %s %s: %v", method, c.Name(), err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if user != nil {
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("silence: %s /api/v2/%s at %s: %v", method, path, c.Name(), unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("silence: %s /api/v2/%s at %s: reading the answer: %v", method, path, c.Name(), err)
	}
	if resp.StatusCode == http.StatusNotFound && method != http.MethodPost {
		return fmt.Errorf("%w: %s /api/v2/%s at %s", ErrNotFound, method, path, c.Name())
	}
	if resp.StatusCode/100 != 2 {
		msg := oneLine(string(data), 200)
		if method == http.MethodDelete && strings.Contains(msg, "already expired") {
			return errAlreadyExpired
		}
		return fmt.Errorf("silence: %s /api/v2/%s at %s: HTTP %d: %s", method, path, c.Name(), resp.StatusCode, msg)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("silence: %s /api/v2/%s at %s: the answer is not the v2 API's JSON: %v", method, path, c.Name(), err)
	}
	return nil
}

// unwrapURLError drops net/http's "Post \"URL\":" prefix, which would print
// the URL unmasked.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// oneLine shortens s to one line of at most max bytes.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "..."
	}
	if s == "" {
		s = "(empty answer)"
	}
	return s
}
