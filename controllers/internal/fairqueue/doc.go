// Package fairqueue is the work queue of every Portico controller: a
// de-duplicating, rate-limiting priority queue, as controller-runtime's,
// that shares the workers between tenants (namespaces) instead of serving
// first-in-first-out.
//
// Why: with one FIFO across the cluster, a tenant that creates 500 objects
// (or keeps updating them) puts every other tenant's change behind its
// whole backlog. Here each tenant has its own FIFO and the queue picks the
// tenant by start-time fair queueing: each tenant has a virtual start tag,
// the tenant with the smallest is served next (one item) and its tag
// advances by one. A tenant that becomes active starts at the virtual time
// (the tag of the item last served), or at its own tag if that is later
// because it was served so recently. So:
//
//   - every tenant with work gets one item per round of tags, whatever its
//     backlog and however fast it adds items again (one that re-adds right
//     after each item keeps its tag advancing like the others);
//   - a tenant that was quiet starts in the current round, ahead of every
//     busy tenant already served in it; among equal tags, a tenant that
//     just became active goes before the busy ones (it had nothing in this
//     round), the later arrival first, so that at 500 busy namespaces a
//     quiet namespace's change is the next item handed out, not the 500th
//     (issue 29). Before anything has been handed out, tenants go in the
//     order they became busy.
//
// An idle tenant's tag is remembered only while it is ahead of the virtual
// time (after that, starting at the virtual time gives the same tag), and a
// priority level with no ready item is dropped with its tags, so memory
// follows the tenants active lately, not every namespace ever seen. Get is
// O(log tenants) (a heap of active tenants per level).
//
// Priorities (controller-runtime gives the initial list of a cache a lower
// priority than live changes) come first: a tenant's item of a higher
// priority is served before any item of a lower one, and the fair queueing
// runs within each priority. De-duplication, the hand-out of an item to one
// worker at a time, delayed and rate-limited adds and shutdown behave as in
// client-go's workqueue. The queue reports controller-runtime's workqueue
// metrics (depth, adds, retries, queue and work durations) under the
// controller's name.
package fairqueue
