package owned_test

import (
	"testing"

	"github.com/portico-dev/portico/internal/owned"
)

// The cache may be behind by more than one of the process's writes: a
// version older than the last write is behind it, whichever it is; the
// cache at the write or past it (another writer) is not.
func TestBehind(t *testing.T) {
	tests := map[string]struct {
		cached, over, written string
		want                  bool
	}{
		"nothing written":                               {"7", "", "", false},
		"the cache at the version written over":         {"7", "7", "9", true},
		"the cache at an earlier write":                 {"7", "8", "9", true},
		"the cache at the write":                        {"9", "7", "9", false},
		"the cache past the write":                      {"12", "7", "9", false},
		"more digits is newer, not a string order":      {"100", "98", "99", false},
		"fewer digits is older, not a string order":     {"99", "100", "101", true},
		"versions that are not numbers: written over":   {"a", "a", "b", true},
		"versions that are not numbers: another":        {"c", "a", "b", false},
		"a number against a write that is not a number": {"5", "5", "b", true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := owned.Behind(tt.cached, tt.over, tt.written); got != tt.want {
				t.Errorf("Behind(%q, %q, %q) = %v, want %v", tt.cached, tt.over, tt.written, got, tt.want)
			}
		})
	}
}
