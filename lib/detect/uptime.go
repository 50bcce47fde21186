package detect

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
)

// uptime says a reboot is needed when the node has been up longer than a
// number of days, for fleets that want bounded uptime whatever the packages
// say. It reads /proc/uptime under Env.Root.
type uptime struct {
	name string
	days int
	env  Env
}

func (u *uptime) Name() string { return u.name }
func (u *uptime) Type() string { return detectspec.TypeMaxUptime }

func (u *uptime) Detect(ctx context.Context) Result {
	start := time.Now()
	r := Result{Name: u.name, Type: detectspec.TypeMaxUptime}
	up, err := u.read()
	limit := time.Duration(u.days) * 24 * time.Hour
	switch {
	case err != nil:
		r.Err = err.Error()
	case up > limit:
		r.Required = true
		r.Detail = fmt.Sprintf("up %s, more than the limit of %d days", roundedUptime(up), u.days)
	default:
		r.Detail = fmt.Sprintf("up %s, within the limit of %d days", roundedUptime(up), u.days)
	}
	r.DurationMS = since(start)
	return r
}

// read returns the uptime from the first field of /proc/uptime ("SECONDS IDLE").
func (u *uptime) read() (time.Duration, error) { return Uptime(u.env) }

// Uptime is how long the machine has been up: the first field of
// /proc/uptime ("SECONDS IDLE") under env.Root, as the max_uptime detector
// reads it.
func Uptime(env Env) (time.Duration, error) {
	const file = "/proc/uptime"
	p, err := env.resolve(file)
	if err != nil {
		return 0, fmt.Errorf("cannot read %s: %v", env.display(file), err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("cannot read the uptime: %v", err)
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0, fmt.Errorf("%s is empty", env.display(file))
	}
	secs, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || !(secs >= 0 && secs <= float64(100*365*24*3600)) { // NaN fails both
		return 0, fmt.Errorf("%s: %q is not an uptime in seconds", env.display(file), oneLine(fields[0], 40))
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// roundedUptime says d in days and hours: "41 days 3 h".
func roundedUptime(d time.Duration) string {
	days := int(d / (24 * time.Hour))
	hours := int(d % (24 * time.Hour) / time.Hour)
	return fmt.Sprintf("%d days %d h", days, hours)
}
