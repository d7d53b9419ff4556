// Package explain decides, from the Istio objects actually stored in a
// cluster, what Istio would do with a request: whether the
// AuthorizationPolicies and RequestAuthentications that apply to a workload
// let it reach the pod (Judge), and where the VirtualServices bound to a
// gateway send it (Route), what the gateway forwards and answers (Forward,
// Respond: the routes' header operations, and the client address the
// gateway derives from X-Forwarded-For with its trusted-proxy count, which
// the backend's sidecar reads as remote.ip).
//
// It models Istio's documented semantics for sidecar workloads selected by
// labels: policies of the workload's namespace whose selector matches its
// labels (no selector: every workload of the namespace) and those of the
// root namespace, mesh-wide; CUSTOM (taken as deny-if-match), then DENY,
// then ALLOW, where at least one applicable ALLOW policy means a request is
// allowed only if one of their rules matches. Key sets are identified by
// their jwksUri; a token is read only where some JWT rule of the workload
// reads tokens (its headers and query parameters, else Istio's defaults). Anything it cannot model faithfully (path templates,
// unknown condition keys, delegated routes, …) is an error, never a guess.
//
// It is a pure package: it reads no cluster. The tenant-attack suite
// (test/tenancy/judge, a thin wrapper) and Explain, which puts routing and
// access together into steps and a verdict for `portico explain`, share it,
// so the tool and the tests cannot disagree.
package explain
