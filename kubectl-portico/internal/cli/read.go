package cli

import (
	"context"
	"fmt"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/explain"
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

// reader lists with the caller's credentials: cluster-wide when allowed,
// else in the caller's namespace, and records what it could not read.
type reader struct {
	c         client.Reader
	namespace string
	hidden    []string
}

// list fills into, cluster-wide or else in the caller's namespace; what
// neither allows is recorded as hidden. Errors other than Forbidden are
// returned.
func (r *reader) list(ctx context.Context, kind string, into client.ObjectList) error {
	err := r.c.List(ctx, into)
	if err == nil {
		return nil
	}
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("listing %s: %w", kind, err)
	}
	err = r.c.List(ctx, into, client.InNamespace(r.namespace))
	switch {
	case err == nil:
		r.hidden = append(r.hidden, kind+" outside namespace "+r.namespace)
		return nil
	case apierrors.IsForbidden(err):
		r.hidden = append(r.hidden, kind)
		return nil
	}
	return fmt.Errorf("listing %s in %s: %w", kind, r.namespace, err)
}

// World reads what the caller may read of the objects explain needs.
func World(ctx context.Context, c client.Reader, namespace, gateway string, edge explain.EdgeGateway) (explain.World, error) {
	r := &reader{c: c, namespace: namespace}
	var (
		vss   networkingv1.VirtualServiceList
		aps   securityv1.AuthorizationPolicyList
		ras   securityv1.RequestAuthenticationList
		svcs  corev1.ServiceList
		rules gatewayv1alpha1.APIRuleList
	)
	for _, l := range []struct {
		kind string
		list client.ObjectList
	}{
		{"VirtualServices", &vss}, {"AuthorizationPolicies", &aps}, {"RequestAuthentications", &ras},
		{"Services", &svcs}, {"APIRules", &rules},
	} {
		if err := r.list(ctx, l.kind, l.list); err != nil {
			return explain.World{}, err
		}
	}
	w := explain.World{
		Gateway: gateway, Edge: edge, VirtualServices: vss.Items, Hidden: r.hidden,
		Policies:  explain.Policies{AuthorizationPolicies: aps.Items, RequestAuthentications: ras.Items},
		Workloads: map[string]map[string]string{},
	}
	for _, svc := range svcs.Items {
		w.Workloads[svc.Namespace+"/"+svc.Name] = svc.Spec.Selector
	}
	w.ForeignHosts = occupiedHosts(rules.Items)
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
