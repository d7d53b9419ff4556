// Package quarantine keeps one undecodable object from stopping a controller.
//
// Invariant: an object that the API server accepts but that does not decode
// into its Go type never stops a controller's lists, watches or caches; every
// other object keeps flowing, and the bad one is reported (a log line, the
// portico_quarantined_objects_total counter and, through a hook, an Event on
// the object).
//
// Such objects exist because the API server's validation is looser than Go's
// decoding: a tenant allowed to write a status subresource can store
// lastTransitionTime "2026-01-01T00:00:00z" (a valid OpenAPI date-time,
// not a valid RFC 3339 time for time.Parse) or an int-or-string
// observedGeneration "not-a-number" in an Istio status. One such object makes
// the typed List of its kind fail, and with it the informer behind every
// controller that watches the kind, for every tenant.
//
// The Guard is an http.RoundTripper wrapper for the controllers' rest.Config
// (rest.Config.Wrap), so every client built on it goes through it: cache
// informers, the API reader and direct clients. It inspects successful JSON
// responses whose kind the scheme knows, and test-decodes every object with
// the scheme's universal deserializer:
//
//   - An object that decodes is passed on byte for byte.
//   - An object that decodes once its status is removed is passed on without
//     status (reason StatusRemoved): status is rewritten by its owner.
//   - An object that still does not decode is left out of lists and watch
//     streams (reason Dropped): an ADDED event is dropped, a MODIFIED event
//     becomes a DELETED event of the object reduced to its metadata so that
//     caches do not keep a stale copy, a DELETED event carries the reduced
//     object. A single-object response (a GET, or the answer to a write) is
//     left unchanged (reason Undecodable): only requests for that one object
//     fail.
//
// With Options.Slim, the object of a good watch event, which the guard has
// just decoded, is replaced by what the controller's cache keeps of it, so
// that the client does not decode the whole object again (the apirule
// controller's VirtualServices: metadata and a hash of the spec). Lists,
// single objects and bad objects are never slimmed.
//
// Watch streams are filtered frame by frame as they arrive, never buffered;
// BOOKMARK and ERROR frames pass through. Responses that are not JSON
// (protobuf, CBOR), not successful, or of kinds outside the scheme (Table,
// PartialObjectMetadata, Status) pass through untouched. The guard sits
// directly above the HTTP transport, which has already removed gzip
// encoding; a body still gzip-encoded is decoded first.
package quarantine
