// Package owned is the one write path of the controllers for the objects
// they own: a table of kinds (how to read, list, compare and copy the spec
// of each) and a Writer that creates, updates and deletes objects of those
// kinds on behalf of an owner.
//
// Its guarantees are the apirule controller's (threat-model.md §16):
// writes are create-first (an object the cache does not show is created,
// and one that turns out to exist is read past the cache before anything
// else); an update carries the resourceVersion of the object whose
// ownership was checked, so it fails rather than overwrite a replacement;
// ownership is proven by the caller's Owns (a controller reference, in the
// owner's namespace for namespaced owners), never by labels; deletions
// carry a UID precondition and leave tombstones, so that a cached copy of a
// deleted object is read again past the cache. It sends no API request
// beyond the one write per object (and a read when a create meets an
// object or a tombstone).
//
// Two more ways of writing keep the guarantees of the controllers that use
// them. Apply mode (Writer.Apply) is the ratelimit controller's: every
// write is a server-side apply of the whole desired object with forced
// ownership of its fields, a name the cache does not show is read past the
// cache (metadata only) before an apply could take it over, and an apply
// over an object carries its UID. ApplyConfiguration is the operator's: a
// typed apply configuration, sent only when it differs from the fields the
// Writer's field manager owns on the live object (or from the server's
// answer to the same apply), so that fields others own cause no write.
// Deletes are the same for all: ownership proven, UID precondition,
// tombstone.
//
// The package is shared by the operator and the controllers, so it names
// no kind itself: the controllers' kinds are described in
// controllers/internal/kinds, the operator's in its reconciler.
//
// It does not decide what is desired, reports no status and holds no
// watch: the controllers keep those, and their own event filters (through
// Observer).
package owned
