// Package readiness turns a controller's Deployment and pods into a phase,
// a documented reason and a human message, following the semantics of
// `kubectl rollout status`. It detects what a rollout alone would only
// report at its progress deadline: pods that cannot be created (the
// Deployment's ReplicaFailure condition) and failing containers (crash
// loops, image and container-start errors), naming the pod and container.
// ImageID finds the image digest the ready pods of the current template run.
//
// It is a pure function of the objects it is given; it reads no cluster.
package readiness
