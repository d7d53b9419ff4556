// Package reconciler is the operator's single state-of-the-world reconcile
// loop. Every event — the APIGateway, a required CRD, a managed Deployment
// or one of its pods — maps to the one key "default"; each reconcile reads
// one snapshot from the informer caches, decides every catalog controller's
// fate with the pure gating, render and readiness packages, applies or
// deletes Deployments with server-side apply, and writes the APIGateway
// status once, only when it changed.
//
// The package owns the cache configuration that keeps the operator cheap
// (schema-less CRDs, Deployments and pods only in its namespace with its
// label, no managedFields except on the Deployments it compares). It never
// reads outside the caches, never polls or sleeps, never creates, changes or
// deletes a CRD, and never touches users' resources.
package reconciler
