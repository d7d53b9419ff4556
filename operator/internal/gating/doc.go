// Package gating decides whether a catalog controller may run on the cluster
// as it is now: enabled in the spec, every required CRD installed,
// Established, not being deleted and serving the required version, and every
// controller it depends on Ready.
//
// The decision is a chain of checks, each returning a reason and a message
// when it fails; the first failing check decides the phase (Disabled or
// Blocked). Everything here is a pure function of its inputs: the package
// reads no cluster and keeps no state.
package gating
