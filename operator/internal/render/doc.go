// Package render builds the desired Deployment of a catalog controller as a
// typed apply configuration, and resolves the image it runs.
//
// Rendering is a pure, deterministic function: the same APIGateway entry,
// catalog entry and operator options always yield a byte-identical object,
// so the reconciler can compare it with what it owns on the cluster and send
// no write when nothing changed. The package never talks to the API server.
package render
