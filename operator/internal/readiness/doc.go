// Package readiness turns a controller's Deployment and pods into a phase,
// a documented reason and a human message, following the semantics of
// `kubectl rollout status`, and detects failing pods (CrashLoopBackOff,
// image pull errors) so the phase can say which pod and container fail.
//
// It is a pure function of the objects it is given; it reads no cluster.
package readiness
