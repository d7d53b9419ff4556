// Package controller reconciles APIRules: for each it resolves its gateway
// (the one it names or, when it names none, the APIGateway's default
// gateway, whose domain its hosts must be directly under), checks the
// Services (and, when Istio's Gateway CRD is installed, the Gateway) it
// references, translates it, and writes the RequestAuthentications,
// AuthorizationPolicies and VirtualService, deleting those no rule needs
// any more. It watches the objects it labelled and rewrites them on drift
// or deletion, and reports a Ready condition.
//
// It writes and deletes only objects it created for the APIRule: those it
// controls by owner reference in the APIRule's namespace (and, for objects
// an earlier version wrote in a Service's other namespace, those labelled
// with the APIRule's namespace and name, which a finalizer lets it
// delete). A same-named object of someone else's is reported (Conflict)
// and left alone; it is found before any write when the cache shows it
// (labelled as the controller's), or when its create fails, which deletes
// what that pass created and writes nothing more. Objects are created, or
// updated at the resourceVersion whose ownership was checked, never
// force-applied: an object that replaced ours in between makes the write
// fail instead of being taken over. A Service in another namespace is used
// only when its annotation
// gateway.portico.dev/allowed-apirule-namespaces consents.
//
// Tenant isolation (docs/threat-model.md): a host has one owner, the oldest
// claim (package hosts); a backend must be an ordinary Service whose pods
// are in its own namespace (no ExternalName, no selector-less Service, no
// foreign endpoints, no ServiceEntry for its host); consent of another
// namespace's Service grants routes only, never policies there; and an
// APIRule whose access rules would meet another APIRule's live policy on
// the same pods with other authentication is refused.
//
// Refusals that withdraw a right (ReferenceNotPermitted,
// BackendNotPermitted, HostOccupied, HostNotPermitted) or leave the
// APIRule without a gateway to serve its hosts (NoDefaultGateway,
// HostNotOnGateway) remove the APIRule's Istio objects. Any other problem
// with the APIRule or what it references is reported in status and leaves
// the live Istio objects as they were.
package controller
