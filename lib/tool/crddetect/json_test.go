package crddetect

import (
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/report/reporttest"
)

func TestResultJSON(t *testing.T) {
	type plain Result
	reporttest.AgreesWithJSON(t, 300, (*Result).AppendJSON, func(r Result) any { return plain(r) })
}
