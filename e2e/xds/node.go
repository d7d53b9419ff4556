package xds

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// The proxy types of Istio's node ids.
const (
	Router  = "router"
	Sidecar = "sidecar"
)

// Node is the proxy a client presents itself as, as istio-agent
// describes its Envoy to istiod.
type Node struct {
	// Type is Router (a gateway) or Sidecar.
	Type string
	// IP is the pod's address, PodName and Namespace its name.
	IP, PodName, Namespace string
	// Labels are the pod's labels: istiod selects Gateways, policies and
	// EnvoyFilters by them.
	Labels map[string]string
	// ServiceAccount is the pod's ServiceAccount name.
	ServiceAccount string
	// WorkloadName is the pod's owner (Deployment) name.
	WorkloadName string
	// IstioVersion is the version the proxy claims (istiod generates for
	// it); ClusterID the cluster (Istio's default "Kubernetes").
	IstioVersion, ClusterID string
	// DNSDomain is the cluster's DNS domain (default cluster.local).
	DNSDomain string
}

// ID is Istio's node id: TYPE~IP~POD.NAMESPACE~NAMESPACE.svc.DOMAIN.
func (n Node) ID() string {
	domain := n.DNSDomain
	if domain == "" {
		domain = "cluster.local"
	}
	return fmt.Sprintf("%s~%s~%s.%s~%s.svc.%s", n.Type, n.IP, n.PodName, n.Namespace, n.Namespace, domain)
}

// Proto is the Envoy node with Istio's node metadata (the keys of
// istio's pilot/pkg/model NodeMetadata that istiod reads to place the
// proxy: namespace, labels, addresses, cluster, version, workload).
func (n Node) Proto() (*corev3.Node, error) {
	version := n.IstioVersion
	if version == "" {
		version = "1.31.0"
	}
	cluster := n.ClusterID
	if cluster == "" {
		cluster = "Kubernetes"
	}
	labels := map[string]any{}
	for k, v := range n.Labels {
		labels[k] = v
	}
	meta := map[string]any{
		"NAMESPACE":         n.Namespace,
		"NAME":              n.PodName,
		"LABELS":            labels,
		"INSTANCE_IPS":      n.IP,
		"CLUSTER_ID":        cluster,
		"ISTIO_VERSION":     version,
		"SERVICE_ACCOUNT":   n.ServiceAccount,
		"WORKLOAD_NAME":     n.WorkloadName,
		"MESH_ID":           "cluster.local",
		"INTERCEPTION_MODE": "REDIRECT",
		"OWNER":             fmt.Sprintf("kubernetes://apis/apps/v1/namespaces/%s/deployments/%s", n.Namespace, n.WorkloadName),
		"PROXY_CONFIG":      map[string]any{},
	}
	if n.Type == Router {
		meta["ROUTER_MODE"] = "standard"
	}
	md, err := structpb.NewStruct(meta)
	if err != nil {
		return nil, fmt.Errorf("node metadata: %w", err)
	}
	app := n.Labels["app"]
	if app == "" {
		app = n.WorkloadName
	}
	return &corev3.Node{Id: n.ID(), Cluster: app + "." + n.Namespace, Metadata: md,
		UserAgentName: "envoy", UserAgentVersionType: &corev3.Node_UserAgentVersion{UserAgentVersion: "e2e-agent"}}, nil
}
