package controller

import (
	"strings"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/hosts"
)

// The indexes of the kinds the alias check reads: each reconcile reads the
// objects of its own Services, not those of the namespace or the cluster.
const (
	// endpointSliceIndex finds EndpointSlices by their Service, as
	// <namespace>/<name>.
	endpointSliceIndex = "endpointslice.service"
	// serviceEntryHostIndex finds ServiceEntries by their hosts, with
	// hostIndex's "h:" keys (lower case).
	serviceEntryHostIndex = "serviceentry.hosts"
)

// endpointSliceKey is endpointSliceIndex's key of an EndpointSlice: the
// Service its label names, in its own namespace.
func endpointSliceKey(o client.Object) []string {
	svc := o.GetLabels()[discoveryv1.LabelServiceName]
	if svc == "" {
		return nil
	}
	return []string{o.GetNamespace() + "/" + svc}
}

// serviceEntryHostKeys are serviceEntryHostIndex's keys of a ServiceEntry.
func serviceEntryHostKeys(o client.Object) []string {
	se, ok := o.(*networkingv1.ServiceEntry)
	if !ok {
		return nil
	}
	keys := make([]string, 0, len(se.Spec.Hosts))
	for _, h := range se.Spec.Hosts {
		keys = append(keys, "h:"+strings.ToLower(h))
	}
	return keys
}

// serviceEntryLookupKeys are the serviceEntryHostIndex keys of every
// ServiceEntry host that may overlap a name of the Service
// (serviceHostNames): the name itself and the wildcards over it.
func serviceEntryLookupKeys(svc *corev1.Service) []string {
	probe := &porticov1alpha1.APIRule{}
	for _, name := range serviceHostNames(svc) {
		probe.Spec.Hosts = append(probe.Spec.Hosts, porticov1alpha1.Hostname(name))
	}
	return overlapKeys(probe)
}

// declaredHost returns the host of a ServiceEntry that Istio would also
// route a name of the Service to, or "". A wildcard of another namespace
// names no Service in particular: counting it would let one tenant's
// "*.svc.cluster.local" stop every APIRule of the cluster.
func declaredHost(se *networkingv1.ServiceEntry, svc *corev1.Service) string {
	names := serviceHostNames(svc)
	for _, h := range se.Spec.Hosts {
		if hosts.IsWildcard(h) && se.Namespace != svc.Namespace {
			continue
		}
		for _, name := range names {
			if hosts.Overlap(strings.ToLower(h), name) {
				return h
			}
		}
	}
	return ""
}

// serviceEntryTargets are the Services a ServiceEntry may declare a name of
// (declaredHost), as <namespace>/<name> for serviceIndex, and, when it has
// a wildcard, its own namespace: whose Services it may all declare.
func serviceEntryTargets(se *networkingv1.ServiceEntry) (services []string, namespace string) {
	for _, h := range se.Spec.Hosts {
		h = strings.ToLower(h)
		if hosts.IsWildcard(h) {
			namespace = se.Namespace
			continue
		}
		// serviceHostNames: <name>.<namespace>[.svc[.cluster.local]].
		for _, suffix := range []string{".svc." + clusterDomain, ".svc", ""} {
			rest, ok := strings.CutSuffix(h, suffix)
			name, ns, dotted := strings.Cut(rest, ".")
			if ok && dotted && !strings.Contains(ns, ".") {
				services = append(services, ns+"/"+name)
			}
		}
	}
	return services, namespace
}

// anyHostKey is routeHostIndex's key of an HTTPRoute without hostnames,
// which serves every host of its Gateway's listeners: one key per Gateway
// it attaches to, so that a reconcile reads the routes of its own Gateway.
func anyHostKey(namespace, name string) string {
	return "any:" + namespace + "/" + name
}

// routeHostKeys are routeHostIndex's keys of an HTTPRoute: hostIndex's
// keys of its hostnames ("h:" host, "u:" each name it lies under) or,
// without hostnames, anyHostKey of each Gateway it names.
func routeHostKeys(o client.Object) []string {
	route := o.(*gwapiv1.HTTPRoute)
	var keys []string
	if len(route.Spec.Hostnames) == 0 {
		for _, ref := range route.Spec.ParentRefs {
			if ref.Group != nil && string(*ref.Group) != porticov1alpha1.GatewayAPIGroup || ref.Kind != nil && string(*ref.Kind) != "Gateway" {
				continue
			}
			ns := route.Namespace
			if ref.Namespace != nil {
				ns = string(*ref.Namespace)
			}
			keys = append(keys, anyHostKey(ns, string(ref.Name)))
		}
		return keys
	}
	for _, h := range route.Spec.Hostnames {
		host := strings.ToLower(string(h))
		keys = append(keys, "h:"+host)
		for _, s := range properSuffixes(strings.TrimPrefix(host, "*.")) {
			keys = append(keys, "u:"+s)
		}
	}
	return keys
}
