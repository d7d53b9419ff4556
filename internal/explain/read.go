package explain

import (
	"context"
	"fmt"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
func Read(ctx context.Context, c client.Reader, namespace, gateway string, edge EdgeGateway) (World, error) {
	w := World{Gateway: gateway, Edge: edge, Workloads: map[string]map[string]string{}}
	var err error
	if w.VirtualServices, err = listKind(ctx, c, namespace, "VirtualServices", &w.Hidden,
		func() client.ObjectList { return &networkingv1.VirtualServiceList{} },
		func(l client.ObjectList) []*networkingv1.VirtualService {
			return l.(*networkingv1.VirtualServiceList).Items
		}); err != nil {
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
