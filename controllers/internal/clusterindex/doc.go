// Package clusterindex registers cache indexes that are read only across
// all namespaces.
//
// controller-runtime's FieldIndexer stores every key of a namespaced
// object twice: once under its namespace, for a List with InNamespace, and
// once under "all namespaces", for a List without. A controller whose
// lookups of an index never name a namespace (which APIRules use this
// Service, this host, this Gateway — in any namespace) holds the first
// half for nothing: at 5,000 APIRules the index sets were a fifth of the
// apirule controller's live heap, and every add or update of an object
// computes and stores both halves.
//
// Field registers only the all-namespaces half, under the name and key
// controller-runtime's cache reader looks up, so a List with
// client.MatchingFields{field: key} and no namespace reads it as before.
// A List that adds InNamespace finds nothing in such an index: use
// controller-runtime's IndexField for an index read per namespace. The
// package's test reads the index through controller-runtime's own cache,
// so a version of controller-runtime that names or keys its indexes
// differently fails it.
package clusterindex
