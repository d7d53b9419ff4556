// Package memlimit keeps a Portico process's heap under its container's
// memory limit. Go's garbage collector lets the heap grow to about twice
// what is live (GOGC=100) and knows nothing of cgroups, so a controller
// whose live heap is half its limit is OOMKilled; with a soft memory limit
// (debug.SetMemoryLimit, what $GOMEMLIMIT sets) it collects harder as the
// heap nears the limit instead.
//
// The operator and the chart give every Portico container the limit in
// bytes through the downward API ($PORTICO_MEMORY_LIMIT, named in
// internal/contract); SoftLimit decides, as a pure function, the soft limit
// it implies: nine tenths of it, the rest left to what is not heap (stacks,
// the runtime, cgo). A $GOMEMLIMIT the user sets wins. Apply sets it at start
// and logs it; the package parses no flags.
package memlimit
