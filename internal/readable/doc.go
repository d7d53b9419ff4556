// Package readable lists objects with the caller's own credentials for
// `portico explain`, keeping apart what the caller may not read: a list
// the API server forbids is recorded as hidden (its namespace, or the
// whole cluster), never returned as an error that would hide the rest, and
// a kind whose CRD is not installed is recorded as absent. It shows
// nothing of a hidden scope, not even how many objects it holds.
//
// It reads through a controller-runtime client.Reader and writes nothing.
package readable
