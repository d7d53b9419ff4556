// Package olmv1 derives what OLM v1 needs to install Portico's bundle, from
// the bundle itself so that the two cannot drift apart: the objects
// operator-controller v1.2.0 makes of a registry+v1 bundle (Objects), and
// the installer, the ServiceAccount a ClusterExtension names
// (spec.serviceAccount) with the least RBAC operator-controller needs to
// install, upgrade, watch and uninstall those objects as it (Installer).
// `make bundle` writes the installer to config/olmv1/installer.yaml
// (hack/release/cmd/bundle --olmv1-installer).
//
// operator-controller installs a bundle as a Helm release of the
// ClusterExtension, every request sent with the installer's token: Helm
// reads each object before it creates it, patches it on upgrades and
// deletes it on uninstall (but the objects annotated
// helm.sh/resource-policy: keep, Portico's CRDs), and operator-controller
// watches every kind of the release in all namespaces. The Kubernetes API
// server lets the installer create a Role, a ClusterRole or a binding only
// if it holds every rule granted (RBAC escalation prevention), unless it
// has the escalate or bind verbs. The installer holds the rules instead:
// escalate on create cannot be limited to names (a create request names no
// object to the authorizer), and the ClusterRoles operator-controller
// creates are named after a hash of their rules and the CSV's name, so
// escalate or bind would let the installer grant anything at all, where
// holding the rules limits what it can grant to exactly Portico's rules.
//
// It does not install anything, and it knows only operator-controller
// v1.2.0's conversion (internal/operator-controller/rukpak/convert):
// another version may create other objects.
package olmv1
