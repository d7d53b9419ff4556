//go:build e2e

package e2e

import (
	"maps"
	"os"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-dev/portico/test/framework"
)

// gatewayXDSEnv names another xDS address (host:port, as the pods reach
// it) for the gateway stand-ins than the node e2e's istiod, which they
// take their listeners, routes and endpoints from by default (e2e-agent
// gateway --xds). There is no opt-out on the node target: the stand-in's
// routes are istiod's.
const gatewayXDSEnv = "E2E_GATEWAY_XDS"

// gatewayXDSAddress is the xDS address the gateway stand-ins take their
// configuration from: on the node target the suite's istiod
// (istiodXDSAddress), or E2E_GATEWAY_XDS's address; "" on kind, where no
// istiod runs, and the stand-ins interpret Gateways and VirtualServices
// themselves (the only target that still does).
func gatewayXDSAddress() string {
	if v := os.Getenv(gatewayXDSEnv); v != "" && v != "istiod" {
		return v
	}
	if target != framework.TargetNode {
		return ""
	}
	return istiodXDSAddress()
}

// gatewayStandInArgs are the arguments of a gateway stand-in serving the
// Gateways (namespace/name): with an xDS address, the stand-in is the
// gateway's Envoy to istiod, binds the listeners istiod sends on their own
// ports (a Gateway server's port is the gateway Service's target port, or
// the server's own port when no Service selects the pods) and presents
// its pods' labels (istiod selects Gateways, policies and EnvoyFilters by
// them); without, it reads the Gateways.
func gatewayStandInArgs(xdsAddr string, labels map[string]string, gateways ...string) []string {
	if xdsAddr != "" {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			kv = append(kv, k+"="+labels[k])
		}
		return []string{"--xds", xdsAddr, "--workload-labels", strings.Join(kv, ",")}
	}
	var args []string
	for _, g := range gateways {
		args = append(args, "--gateway", g)
	}
	return args
}

// xdsStatusPort is the stand-in's status listener in xDS mode, Istio's
// gateway's 15021: /healthz/ready answers 200 once every listener istiod
// sent is bound.
const xdsStatusPort = 15021

// asGatewayPods makes a gateway stand-in's pods what Istio's gateway
// pods are for its listeners, when it is programmed over xDS: ready once
// istiod's listeners are bound (the status listener's /healthz/ready, not
// a fixed port: istiod decides the ports), and allowed to bind ports
// below 1024 without privileges (the sysctl
// net.ipv4.ip_unprivileged_port_start=0 Istio's gateway pods set, which
// the restricted Pod Security Standard admits), since a Gateway server
// that no Service maps is on its own port, e.g. 80.
func asGatewayPods(d *appsv1.Deployment, xdsAddr string) *appsv1.Deployment {
	if xdsAddr == "" {
		return d
	}
	spec := &d.Spec.Template.Spec
	c := &spec.Containers[0]
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz/ready", Port: intstr.FromInt32(xdsStatusPort)}},
		PeriodSeconds: 1,
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	spec.SecurityContext.Sysctls = append(spec.SecurityContext.Sysctls, corev1.Sysctl{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"})
	return d
}

// withProxyIdentity gives a stand-in's container its pod's identity from
// the downward API (POD_IP, POD_NAME, POD_NAMESPACE, SERVICE_ACCOUNT):
// the node id and metadata istiod places a proxy by.
func withProxyIdentity(d *appsv1.Deployment) *appsv1.Deployment {
	c := &d.Spec.Template.Spec.Containers[0]
	for name, path := range map[string]string{"POD_IP": "status.podIP", "POD_NAME": "metadata.name",
		"POD_NAMESPACE": "metadata.namespace", "SERVICE_ACCOUNT": "spec.serviceAccountName"} {
		c.Env = append(c.Env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}})
	}
	return d
}
