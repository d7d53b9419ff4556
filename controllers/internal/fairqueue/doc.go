// Package fairqueue is the work queue of every Portico controller: a
// de-duplicating, rate-limiting priority queue, as controller-runtime's,
// that hands out the ready items of different tenants (namespaces) in
// turn instead of first-in-first-out.
//
// Why: with one FIFO across the cluster, a tenant that creates 500 objects
// (or keeps updating them) puts every other tenant's change behind its
// whole backlog. Here each tenant has its own FIFO, and Get takes one item
// from each tenant with ready items in round-robin, so an item of a quiet
// tenant waits for at most one item of each busy tenant ahead of it,
// whatever their backlogs: with w workers and t tenants with work, its
// wait is bounded by about t/w reconciles, not by the queue's length.
//
// Priorities (controller-runtime gives the initial list of a cache a lower
// priority than live changes) come first: a tenant's item of a higher
// priority is served before any item of a lower one, and the round-robin
// runs within each priority. De-duplication, the hand-out of an item to one
// worker at a time, delayed and rate-limited adds and shutdown behave as in
// client-go's workqueue. The queue reports controller-runtime's workqueue
// metrics (depth, adds, retries, queue and work durations) under the
// controller's name.
package fairqueue
