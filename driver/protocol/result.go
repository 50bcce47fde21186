package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// DecodeResult decodes the one JSON object of a child's stdout into out
// (the last non-empty line, should anything else have been printed).
func DecodeResult(stdout []byte, out any) error {
	text := strings.TrimSpace(string(stdout))
	if text == "" {
		return errors.New("empty output")
	}
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[i+1:]
	}
	if out == nil {
		var ignore map[string]any
		out = &ignore
	}
	if err := json.Unmarshal([]byte(text), out); err != nil {
		return fmt.Errorf("output is not one JSON object: %v", err)
	}
	return nil
}
