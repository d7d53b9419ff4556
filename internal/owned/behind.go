package owned

import "k8s.io/apimachinery/pkg/util/resourceversion"

// Behind reports whether a cached object of resourceVersion cached is older
// than a write of this process that was made over resourceVersion over and
// produced resourceVersion written: until the cache catches up, the write is
// the newest state known.
//
// The cache may be behind by more than one write (read at 1, write 2,
// write 3, the cache delivers 2): any version older than the write's is
// behind it, not only the one it was written over. Versions that do not
// compare as numbers are behind only when they are the one written over.
func Behind(cached, over, written string) bool {
	if over == "" && written == "" {
		return false
	}
	if c, err := resourceversion.CompareResourceVersion(cached, written); err == nil {
		return c < 0
	}
	return cached == over
}
