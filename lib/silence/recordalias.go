package silence

import "github.com/clusterrebootd/clusterrebootd/lib/silence/record"

// The record of a reboot's silences lives in lib/silence/record, which the
// daemon's status reads without linking this package's HTTP client.
type (
	// Record is the silences of one reboot.
	Record = record.Record
	// Entry is one silence on one Alertmanager.
	Entry = record.Entry
)

// RecordFile is the record's name in state_dir.
const RecordFile = record.RecordFile

// RecordPath, WriteRecord, ReadRecord and RemoveRecord are lib/silence/record's.
var (
	RecordPath   = record.RecordPath
	WriteRecord  = record.WriteRecord
	ReadRecord   = record.ReadRecord
	RemoveRecord = record.RemoveRecord
)
