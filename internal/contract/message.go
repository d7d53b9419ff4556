package contract

import (
	"strings"
	"unicode/utf8"
)

// Limits of the API fields Portico writes text into. The API server counts
// characters; Truncate counts bytes, which are never fewer, so a result
// within a limit in bytes is within it in characters too.
const (
	// MessageMaxLength bounds every condition and status message a
	// controller writes: an error from the API server may quote much of the
	// object it refused, and a status write with a longer message than the
	// API allows would fail and leave a stale status.
	MessageMaxLength = 4096

	// ControllerStatusMaxLength is the maxLength of an APIGateway's
	// status.controllers[].message (api/operator/v1alpha1).
	ControllerStatusMaxLength = 4096
	// ImageIDMaxLength is the maxLength of status.controllers[].imageID.
	ImageIDMaxLength = 512
	// ConditionMaxLength is the maxLength of metav1.Condition's message.
	ConditionMaxLength = 32 * 1024
	// EventNoteMaxLength is the limit of an events.k8s.io/v1 Event's note.
	EventNoteMaxLength = 1024
)

// TruncatedNote ends a message that Truncate shortened.
const TruncatedNote = "… (truncated)"

// Truncate returns s with invalid UTF-8 replaced and, when it is longer
// than limit bytes, cut at a character boundary and ended with
// TruncatedNote so that the result is at most limit bytes.
//
// Invalid UTF-8 is replaced even in short messages: the API server stores
// it as U+FFFD, and a status compared with what was stored would otherwise
// differ forever.
func Truncate(s string, limit int) string {
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	if len(s) <= limit {
		return s
	}
	if limit < len(TruncatedNote) {
		return cut(s, limit)
	}
	return cut(s, limit-len(TruncatedNote)) + TruncatedNote
}

// cut returns the longest prefix of s that is at most n bytes and ends on
// a character boundary.
func cut(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
