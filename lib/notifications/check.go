package notifications

import (
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"strings"

	"github.com/nicholas-fedor/shoutrrr/pkg/router"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/matrix"
)

// CheckURL asks shoutrrr whether it can use rawURL, without sending
// anything: the service must be one it knows, and the URL well formed for
// that service (the service parses its own part; none is contacted). The
// error shows no
// secret (config.MaskURL's form, the URL's pieces replaced by ***).
func CheckURL(rawURL string) error {
	quiet := log.New(io.Discard, "", 0)
	r, err := router.New(quiet)
	if err != nil {
		return scrub(err, rawURL)
	}
	scheme, u, err := r.ExtractServiceName(rawURL)
	if err != nil {
		return errors.New("shoutrrr cannot parse it as a URL")
	}
	svc, err := r.NewService(scheme)
	if err != nil {
		known := r.ListServices()
		slices.Sort(known)
		return fmt.Errorf("shoutrrr knows no service %q: use one of %s", scheme, strings.Join(known, ", "))
	}
	switch {
	case scheme == "matrix":
		// Matrix logs in when initialised: only its configuration is read.
		err = (&matrix.Config{}).SetURL(u)
	case u.Scheme != scheme:
		// service+scheme://: the service turns its custom URL into its own.
		_, err = r.Locate(rawURL)
	default:
		err = svc.Initialize(u, quiet)
	}
	if err != nil {
		return scrub(fmt.Errorf("the %s service refuses it: %w", scheme, err), rawURL)
	}
	return nil
}
