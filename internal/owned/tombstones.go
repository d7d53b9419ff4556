package owned

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Tombstones are the UIDs of objects a Writer deleted, for a while: a
// cached copy of one is read again past the cache, so a controller never
// reports an object that is gone as written.
type Tombstones struct {
	mu   sync.Mutex
	uids map[types.UID]time.Time
}

// TombstoneTTL is how long a deleted object is remembered: far longer than
// a watch takes to report the deletion.
const TombstoneTTL = 5 * time.Minute

// Add remembers uid as deleted.
func (t *Tombstones) Add(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if t.uids == nil {
		t.uids = map[types.UID]time.Time{}
	}
	if len(t.uids) >= 1024 {
		for u, at := range t.uids {
			if now.Sub(at) > TombstoneTTL {
				delete(t.uids, u)
			}
		}
	}
	t.uids[uid] = now
}

// Has reports whether uid was deleted within TombstoneTTL.
func (t *Tombstones) Has(uid types.UID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.uids[uid]
	return ok && time.Since(at) <= TombstoneTTL
}
