// Package e2e holds Portico's end-to-end suite: one set of Ginkgo specs,
// each a user story, run against one of two targets (build tag e2e):
//
//   - local (default, `make test-e2e`): a real control plane — etcd,
//     kube-apiserver, kube-controller-manager, kube-scheduler built from Go
//     modules — with kwok nodes, so Deployments really roll out. The chart is
//     installed with helm with the operator scaled to zero; the operator and
//     each controller run as host processes whose kubeconfig impersonates the
//     ServiceAccount the chart created for them, so a missing RBAC rule fails
//     the suite. Controller processes are started from the args and env of
//     the Deployments the operator creates and stopped when it deletes them.
//   - kind (`make test-e2e-kind`, needs Docker): a kind cluster, every image
//     built and loaded, the chart installed, real pods.
//
// The package itself holds no code outside the e2e build tag.
package e2e
