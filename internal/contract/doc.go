// Package contract is the operator↔controller contract, written down once.
//
// The operator starts each gateway controller as a Deployment and gates it
// on CRDs; the controller binary parses the flags the operator passes,
// serves the probes the Deployment points at and watches the same CRDs.
// Everything both sides must agree on lives here and nowhere else:
//
//   - per controller (Controllers): its name, binary and image name, the
//     RELATED_IMAGE_* variable that overrides its image, the CRDs it
//     requires (with the version each must serve) and the CRDs it uses
//     when present;
//   - every CRD name Portico depends on (the CRD variables);
//   - when a CRD is usable (StateOf, Usable) and what of a CRD a cache
//     keeps (TransformCRD);
//   - the controller container: flag names, ports, probe paths,
//     environment variables (process.go);
//   - the version stamped into every binary at build time (Version);
//   - how long a message written into an API object may be (Truncate and
//     the limits).
//
// The operator's catalog, its Deployment renderer, the controller runner,
// each controller's main package, the release tooling and the tests read
// it, so a change here reaches every side at once. The package depends
// only on API types; it holds no behaviour beyond pure functions.
package contract
