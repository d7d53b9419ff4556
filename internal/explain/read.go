package explain

import (
	"context"
	"fmt"
	"strings"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/readable"
)

// Scheme holds the kinds explain reads.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(networkingv1.AddToScheme(s))
	utilruntime.Must(securityv1.AddToScheme(s))
	utilruntime.Must(gatewayv1alpha1.AddToScheme(s))
	utilruntime.Must(gwapiv1.Install(s))
	return s
}

// listKind lists one kind with readable.List over the caller's namespace
// and records what it could not read in *hidden, as a phrase.
func listKind[T any](ctx context.Context, c client.Reader, namespace, kind string, hidden *[]string,
	newList func() client.ObjectList, items func(client.ObjectList) []T) ([]T, error) {
	l, err := readable.List(ctx, c, newList, items, []string{namespace})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", kind, err)
	}
	switch {
	case l.Absent:
		*hidden = append(*hidden, kind+" (not served by this cluster)")
	case len(l.Listed) > 0:
		*hidden = append(*hidden, kind+" outside namespace "+namespace)
	case len(l.Hidden) > 0:
		*hidden = append(*hidden, kind)
	}
	return l.Items, nil
}

// Read reads, with the caller's client c, what the caller may read of the
// objects an explanation needs: each kind across the cluster if it may,
// else in its namespace, what it may not read recorded in World.Hidden.
// The request arrives at the Istio Gateway gateway (Istio mode).
func Read(ctx context.Context, c client.Reader, namespace, gateway string, edge EdgeGateway) (World, error) {
	return ReadMode(ctx, c, namespace, gateway, false, edge)
}

// ReadMode is Read for a request arriving at an Istio Gateway, or with
// gatewayAPI at a Gateway API Gateway (HTTPRoute mode: its Gateways,
// HTTPRoutes and the namespaces' labels are read instead of the
// VirtualServices).
func ReadMode(ctx context.Context, c client.Reader, namespace, gateway string, gatewayAPI bool, edge EdgeGateway) (World, error) {
	w := World{Gateway: gateway, GatewayAPI: gatewayAPI, Edge: edge, Workloads: map[string]map[string]string{}}
	var err error
	if gatewayAPI {
		err = readGatewayAPI(ctx, c, namespace, &w)
	} else {
		err = readIstioGateways(ctx, c, namespace, &w)
	}
	if err != nil {
		return w, err
	}
	if w.Policies.AuthorizationPolicies, err = listKind(ctx, c, namespace, "AuthorizationPolicies", &w.Hidden,
		func() client.ObjectList { return &securityv1.AuthorizationPolicyList{} },
		func(l client.ObjectList) []*securityv1.AuthorizationPolicy {
			return l.(*securityv1.AuthorizationPolicyList).Items
		}); err != nil {
		return w, err
	}
	if w.Policies.RequestAuthentications, err = listKind(ctx, c, namespace, "RequestAuthentications", &w.Hidden,
		func() client.ObjectList { return &securityv1.RequestAuthenticationList{} },
		func(l client.ObjectList) []*securityv1.RequestAuthentication {
			return l.(*securityv1.RequestAuthenticationList).Items
		}); err != nil {
		return w, err
	}
	svcs, err := listKind(ctx, c, namespace, "Services", &w.Hidden,
		func() client.ObjectList { return &corev1.ServiceList{} },
		func(l client.ObjectList) []corev1.Service { return l.(*corev1.ServiceList).Items })
	if err != nil {
		return w, err
	}
	for _, svc := range svcs {
		w.Workloads[svc.Namespace+"/"+svc.Name] = svc.Spec.Selector
	}
	rules, err := listKind(ctx, c, namespace, "APIRules", &w.Hidden,
		func() client.ObjectList { return &gatewayv1alpha1.APIRuleList{} },
		func(l client.ObjectList) []gatewayv1alpha1.APIRule { return l.(*gatewayv1alpha1.APIRuleList).Items })
	if err != nil {
		return w, err
	}
	for i := range rules {
		w.APIRules = append(w.APIRules, &rules[i])
	}
	w.ForeignHosts = occupiedHosts(rules)
	limits, err := listKind(ctx, c, namespace, "RateLimits", &w.Hidden,
		func() client.ObjectList { return &gatewayv1alpha1.RateLimitList{} },
		func(l client.ObjectList) []gatewayv1alpha1.RateLimit { return l.(*gatewayv1alpha1.RateLimitList).Items })
	if err != nil {
		return w, err
	}
	for i := range limits {
		w.RateLimits = append(w.RateLimits, &limits[i])
	}
	return w, nil
}

// occupiedHosts are the hosts of the caller's APIRules whose status says
// another APIRule owns them: what statuses tell a tenant, and no more.
func occupiedHosts(rules []gatewayv1alpha1.APIRule) []string {
	var out []string
	for _, rule := range rules {
		for _, c := range rule.Status.Conditions {
			if c.Reason == gatewayv1alpha1.ReasonHostOccupied {
				for _, h := range rule.Spec.Hosts {
					out = append(out, string(h))
				}
			}
		}
	}
	return out
}

// readIstioGateways reads the Istio Gateways, the VirtualServices, and the
// client CA bundles of the MUTUAL servers of the request's Gateway.
func readIstioGateways(ctx context.Context, c client.Reader, namespace string, w *World) error {
	var err error
	if w.IstioGateways, err = listKind(ctx, c, namespace, "Gateways", &w.Hidden,
		func() client.ObjectList { return &networkingv1.GatewayList{} },
		func(l client.ObjectList) []*networkingv1.Gateway { return l.(*networkingv1.GatewayList).Items }); err != nil {
		return err
	}
	if w.VirtualServices, err = listKind(ctx, c, namespace, "VirtualServices", &w.Hidden,
		func() client.ObjectList { return &networkingv1.VirtualServiceList{} },
		func(l client.ObjectList) []*networkingv1.VirtualService {
			return l.(*networkingv1.VirtualServiceList).Items
		}); err != nil {
		return err
	}
	w.ClientCAs = map[string][]byte{}
	for _, gw := range w.IstioGateways {
		if gw.Namespace+"/"+gw.Name != w.Gateway {
			continue
		}
		for _, s := range gw.Spec.Servers {
			if tls := s.GetTls(); tls.GetMode() == networkingv1alpha3.ServerTLSSettings_MUTUAL || tls.GetMode() == networkingv1alpha3.ServerTLSSettings_OPTIONAL_MUTUAL {
				if bundle, ok := clientCABundle(ctx, c, gw.Namespace, caName(tls)); ok {
					w.ClientCAs[caName(tls)] = bundle
				}
			}
		}
	}
	return nil
}

// clientCABundle reads a client CA credential of the gateway's namespace as
// istiod's SDS serves it: `configmap://NS/NAME` is a ConfigMap (key
// ca.crt); any other name (`kubernetes://[NS/]NAME` or plain) is a Secret
// of the gateway's namespace (key cacert, else ca.crt), never a ConfigMap;
// a `NAME-cacert` Secret, when it exists, is the only one read, else NAME's.
// False when the caller may not read it or it is not there.
func clientCABundle(ctx context.Context, c client.Reader, ns, name string) ([]byte, bool) {
	if ref, ok := strings.CutPrefix(name, "configmap://"); ok {
		cmNS, cmName, found := strings.Cut(ref, "/")
		if !found || cmNS != ns {
			return nil, false
		}
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: cmNS, Name: cmName}, cm); err != nil {
			return nil, false
		}
		v, ok := cm.Data["ca.crt"]
		return []byte(v), ok
	}
	name = strings.TrimPrefix(name, "kubernetes://")
	if secretNS, secretName, found := strings.Cut(name, "/"); found {
		if secretNS != ns {
			return nil, false
		}
		name = secretName
	}
	read := func(name string) ([]byte, bool, bool) {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
			return nil, false, false
		}
		for _, key := range []string{"cacert", "ca.crt"} {
			if v, ok := secret.Data[key]; ok {
				return v, true, true
			}
		}
		return nil, false, true
	}
	bundle, ok, exists := read(name)
	if base, companion := strings.CutSuffix(name, "-cacert"); companion && !exists {
		bundle, ok, _ = read(base)
	}
	return bundle, ok
}

// readGatewayAPI reads the Gateway API Gateways and HTTPRoutes, and the
// labels of the namespaces the caller may list (none if it may not).
func readGatewayAPI(ctx context.Context, c client.Reader, namespace string, w *World) error {
	var err error
	if w.APIGateways, err = listKind(ctx, c, namespace, "Gateways (Gateway API)", &w.Hidden,
		func() client.ObjectList { return &gwapiv1.GatewayList{} },
		func(l client.ObjectList) []*gwapiv1.Gateway { return pointers(l.(*gwapiv1.GatewayList).Items) }); err != nil {
		return err
	}
	if w.HTTPRoutes, err = listKind(ctx, c, namespace, "HTTPRoutes", &w.Hidden,
		func() client.ObjectList { return &gwapiv1.HTTPRouteList{} },
		func(l client.ObjectList) []*gwapiv1.HTTPRoute { return pointers(l.(*gwapiv1.HTTPRouteList).Items) }); err != nil {
		return err
	}
	w.NamespaceLabels = map[string]map[string]string{}
	var namespaces corev1.NamespaceList
	if err := c.List(ctx, &namespaces); err == nil {
		for _, ns := range namespaces.Items {
			w.NamespaceLabels[ns.Name] = ns.Labels
		}
	}
	return nil
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
