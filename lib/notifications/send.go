package notifications

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nicholas-fedor/shoutrrr"
	"github.com/nicholas-fedor/shoutrrr/pkg/types"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
)

// webhookSender POSTs the payload as JSON to rawURL. Any 2xx answer is
// success. Redirects are not followed (a token in the URL would follow).
func webhookSender(rawURL string, timeout time.Duration) func(context.Context, Payload) error {
	client := &http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return func(ctx context.Context, p Payload) error {
		body, err := json.Marshal(p)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
		if err != nil {
			return scrub(err, rawURL)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "clusterrebootd")
		resp, err := client.Do(req)
		if err != nil {
			return scrub(err, rawURL)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return fmt.Errorf("the webhook answered HTTP %d", resp.StatusCode)
		}
		return nil
	}
}

// shoutrrrSender sends the message through the shoutrrr service of rawURL.
// The router bounds each send by timeout itself; shoutrrr's own logging is
// discarded (it could print the URL).
func shoutrrrSender(rawURL string, timeout time.Duration) func(context.Context, Payload) error {
	router, initErr := shoutrrr.NewSender(log.New(io.Discard, "", 0), rawURL)
	if initErr == nil {
		router.Timeout = timeout
	}
	return func(ctx context.Context, p Payload) error {
		if initErr != nil {
			return scrub(fmt.Errorf("shoutrrr cannot use this URL: %w", initErr), rawURL)
		}
		params := types.Params{"title": "clusterrebootd: " + p.Event}
		errs := router.Send(p.Message, &params)
		if err := errors.Join(errs...); err != nil {
			return scrub(err, rawURL)
		}
		return ctx.Err()
	}
}

// scrub removes rawURL's secrets from err's text: net/http's *url.Error
// repeats the whole URL, and a service may quote parts of it. Every piece
// of the URL that MaskURL hides is replaced by ***.
func scrub(err error, rawURL string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	msg := strings.ReplaceAll(err.Error(), rawURL, "***")
	for _, piece := range secretPieces(rawURL) {
		msg = strings.ReplaceAll(msg, piece, "***")
	}
	return errors.New(msg)
}

// secretPieces are the parts of rawURL (split at its delimiters, decoded
// too) of four characters or more that MaskURL does not show.
func secretPieces(rawURL string) []string {
	_, rest, _ := strings.Cut(rawURL, "://")
	shown := config.MaskURL(rawURL)
	var out []string
	for _, p := range strings.FieldsFunc(rest, func(r rune) bool { return strings.ContainsRune("/?&=@:#+;,", r) }) {
		for _, q := range []string{p, unescape(p)} {
			if len(q) >= 4 && !strings.Contains(shown, q) {
				out = append(out, q)
			}
		}
	}
	return out
}

func unescape(s string) string {
	u, err := url.QueryUnescape(s)
	if err != nil {
		return s
	}
	return u
}
