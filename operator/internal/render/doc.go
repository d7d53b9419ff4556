// Package render builds the desired Deployment and PodDisruptionBudget of a
// catalog controller as typed apply configurations, resolves the image it
// runs, and decides whether a controller's spec must be refused
// (Refusal: extraArgs the binary does not take or the operator sets).
//
// Rendering is a pure, deterministic function: the same APIGateway entry,
// catalog entry and operator options always yield a byte-identical object,
// so the reconciler can compare it with what it owns on the cluster and send
// no write when nothing changed. The package never talks to the API server.
package render
