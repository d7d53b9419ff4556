// Package status computes an APIGateway's status from the per-controller
// results of one reconcile: each controller's entry (keeping its
// lastTransitionTime while the phase is unchanged), the aggregate state, the
// ready summary and the Ready condition.
//
// Every function is pure and takes the clock as an argument, so an unchanged
// cluster always yields an identical status and the reconciler writes
// nothing.
package status
