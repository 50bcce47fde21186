package proc

import "strings"

// maxLine bounds LastLine (bytes, before the "..." mark).
const maxLine = 200

// LastLine returns the last non-empty line of s, trimmed and shortened to
// 200 bytes (marked with "..."): what a message quotes of a command's
// output.
func LastLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" {
			continue
		}
		if len(l) > maxLine {
			l = strings.ToValidUTF8(l[:maxLine], "") + "..."
		}
		return l
	}
	return ""
}
