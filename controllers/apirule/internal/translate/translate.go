package translate

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Labels on every object the apirule controller writes.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "apirule-controller"
	LabelAPIRule   = "gateway.portico.dev/apirule"
)

// Input is an APIRule and what the cluster told about its backend.
type Input struct {
	APIRule *gatewayv1alpha1.APIRule
	// Selector is the pod selector of the default Service: the workload the
	// AuthorizationPolicy and RequestAuthentication apply to.
	Selector map[string]string
	// ClusterDomain completes Service host names; "cluster.local" when empty.
	ClusterDomain string
}

// Output holds the desired Istio objects.
type Output struct {
	VirtualService        *networkingv1.VirtualService
	AuthorizationPolicy   *securityv1.AuthorizationPolicy
	RequestAuthentication *securityv1.RequestAuthentication // nil without JWT rules
}

// DefaultService returns the Service that serves rules without their own.
func DefaultService(r *gatewayv1alpha1.APIRule) gatewayv1alpha1.ServiceReference {
	if r.Spec.Service != nil {
		return withNamespace(*r.Spec.Service, r.Namespace)
	}
	for _, rule := range r.Spec.Rules {
		if rule.Service != nil {
			return withNamespace(*rule.Service, r.Namespace)
		}
	}
	return gatewayv1alpha1.ServiceReference{}
}

// Services returns every Service the APIRule routes to, sorted.
func Services(r *gatewayv1alpha1.APIRule) []gatewayv1alpha1.ServiceReference {
	seen := map[gatewayv1alpha1.ServiceReference]bool{}
	var out []gatewayv1alpha1.ServiceReference
	for _, rule := range r.Spec.Rules {
		s := serviceOf(r, rule)
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name || (out[i] == out[j] && out[i].Port < out[j].Port)
	})
	return out
}

func withNamespace(s gatewayv1alpha1.ServiceReference, ns string) gatewayv1alpha1.ServiceReference {
	if s.Namespace == "" {
		s.Namespace = ns
	}
	return s
}

func serviceOf(r *gatewayv1alpha1.APIRule, rule gatewayv1alpha1.Rule) gatewayv1alpha1.ServiceReference {
	if rule.Service != nil {
		return withNamespace(*rule.Service, r.Namespace)
	}
	return DefaultService(r)
}

// Translate builds the Istio objects of an APIRule.
func Translate(in Input) (Output, error) {
	r := in.APIRule
	if len(in.Selector) == 0 {
		return Output{}, fmt.Errorf("service %s has no pod selector, so access rules cannot be bound to a workload", DefaultService(r).Name)
	}
	jwtRules, err := jwtRules(r)
	if err != nil {
		return Output{}, err
	}
	out := Output{
		VirtualService:      virtualService(r, in.ClusterDomain),
		AuthorizationPolicy: authorizationPolicy(r, in.Selector),
	}
	if len(jwtRules) > 0 {
		ra := &securityv1.RequestAuthentication{
			TypeMeta:   metav1.TypeMeta{APIVersion: "security.istio.io/v1", Kind: "RequestAuthentication"},
			ObjectMeta: objectMeta(r),
		}
		ra.Spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: maps.Clone(in.Selector)}
		ra.Spec.JwtRules = jwtRules
		out.RequestAuthentication = ra
	}
	return out, nil
}

func objectMeta(r *gatewayv1alpha1.APIRule) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      r.Name,
		Namespace: r.Namespace,
		Labels:    map[string]string{LabelManagedBy: ManagedBy, LabelAPIRule: r.Name},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: gatewayv1alpha1.GroupVersion.String(), Kind: "APIRule", Name: r.Name, UID: r.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

// orderedRules sorts rules so Istio, which takes the first matching route,
// prefers exact paths, then longer prefixes; ties are broken by route name.
func orderedRules(r *gatewayv1alpha1.APIRule) []gatewayv1alpha1.Rule {
	rules := slices.Clone(r.Spec.Rules)
	sort.SliceStable(rules, func(i, j int) bool {
		pi, pj := isPrefix(rules[i].Path), isPrefix(rules[j].Path)
		if pi != pj {
			return !pi
		}
		if len(rules[i].Path) != len(rules[j].Path) {
			return len(rules[i].Path) > len(rules[j].Path)
		}
		return gatewayv1alpha1.RouteName(r.Namespace, r.Name, rules[i]) < gatewayv1alpha1.RouteName(r.Namespace, r.Name, rules[j])
	})
	return rules
}

func isPrefix(path string) bool { return strings.HasSuffix(path, "/*") }

func uriMatch(path string) *networkingv1alpha3.StringMatch {
	if isPrefix(path) {
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Prefix{Prefix: strings.TrimSuffix(path, "*")}}
	}
	return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Exact{Exact: path}}
}

func methodStrings(methods []gatewayv1alpha1.HTTPMethod) []string {
	out := make([]string, len(methods))
	for i, m := range methods {
		out[i] = string(m)
	}
	slices.Sort(out)
	return out
}

func duration(d *metav1.Duration) *durationpb.Duration {
	if d == nil {
		return nil
	}
	return durationpb.New(d.Duration)
}

func virtualService(r *gatewayv1alpha1.APIRule, clusterDomain string) *networkingv1.VirtualService {
	if clusterDomain == "" {
		clusterDomain = "cluster.local"
	}
	hosts := make([]string, len(r.Spec.Hosts))
	for i, h := range r.Spec.Hosts {
		hosts[i] = string(h)
	}
	vs := &networkingv1.VirtualService{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.istio.io/v1", Kind: "VirtualService"},
		ObjectMeta: objectMeta(r),
	}
	// Proto messages must not be copied: fill the object's spec in place.
	spec := &vs.Spec
	spec.Hosts, spec.Gateways = hosts, []string{r.Spec.Gateway}
	for _, rule := range orderedRules(r) {
		svc := serviceOf(r, rule)
		match := &networkingv1alpha3.HTTPMatchRequest{Uri: uriMatch(rule.Path)}
		if methods := methodStrings(rule.Methods); len(methods) > 0 {
			match.Method = &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Regex{
				Regex: "^(" + strings.Join(methods, "|") + ")$",
			}}
		}
		timeout := rule.Timeout
		if timeout == nil {
			timeout = r.Spec.Timeout
		}
		spec.Http = append(spec.Http, &networkingv1alpha3.HTTPRoute{
			Name:  gatewayv1alpha1.RouteName(r.Namespace, r.Name, rule),
			Match: []*networkingv1alpha3.HTTPMatchRequest{match},
			Route: []*networkingv1alpha3.HTTPRouteDestination{{Destination: &networkingv1alpha3.Destination{
				Host: fmt.Sprintf("%s.%s.svc.%s", svc.Name, svc.Namespace, clusterDomain),
				Port: &networkingv1alpha3.PortSelector{Number: uint32(svc.Port)},
			}}},
			Timeout:    duration(timeout),
			CorsPolicy: corsPolicy(r.Spec.CORS),
		})
	}
	return vs
}

func corsPolicy(c *gatewayv1alpha1.CORSPolicy) *networkingv1alpha3.CorsPolicy {
	if c == nil {
		return nil
	}
	p := &networkingv1alpha3.CorsPolicy{
		AllowMethods:  methodStrings(c.AllowMethods),
		AllowHeaders:  slices.Clone(c.AllowHeaders),
		ExposeHeaders: slices.Clone(c.ExposeHeaders),
		MaxAge:        duration(c.MaxAge),
	}
	for _, o := range c.AllowOrigins {
		if o == "*" {
			p.AllowOrigins = append(p.AllowOrigins, &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Regex{Regex: ".*"}})
			continue
		}
		p.AllowOrigins = append(p.AllowOrigins, &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Exact{Exact: o}})
	}
	if c.AllowCredentials != nil {
		p.AllowCredentials = wrapperspb.Bool(*c.AllowCredentials)
	}
	return p
}

func authorizationPolicy(r *gatewayv1alpha1.APIRule, selector map[string]string) *securityv1.AuthorizationPolicy {
	ap := &securityv1.AuthorizationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "security.istio.io/v1", Kind: "AuthorizationPolicy"},
		ObjectMeta: objectMeta(r),
	}
	spec := &ap.Spec
	spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: maps.Clone(selector)}
	spec.Action = securityv1beta1.AuthorizationPolicy_ALLOW
	for _, exposed := range orderedRules(r) {
		rule := &securityv1beta1.Rule{To: []*securityv1beta1.Rule_To{{Operation: &securityv1beta1.Operation{
			Paths:   []string{exposed.Path},
			Methods: methodStrings(exposed.Methods),
		}}}}
		if jwt := exposed.JWT; jwt != nil {
			rule.From = []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{
				RequestPrincipals: []string{jwt.Issuer + "/*"},
			}}}
			if len(jwt.Audiences) > 0 {
				rule.When = append(rule.When, &securityv1beta1.Condition{Key: "request.auth.claims[aud]", Values: slices.Sorted(slices.Values(jwt.Audiences))})
			}
			for _, scope := range slices.Sorted(slices.Values(jwt.RequiredScopes)) {
				rule.When = append(rule.When, &securityv1beta1.Condition{Key: "request.auth.claims[scope]", Values: []string{scope}})
			}
		}
		spec.Rules = append(spec.Rules, rule)
	}
	return ap
}

// jwtRules collects one JWT rule per issuer. Two rules naming the same
// issuer with different key sets cannot both hold.
func jwtRules(r *gatewayv1alpha1.APIRule) ([]*securityv1beta1.JWTRule, error) {
	byIssuer := map[string]*securityv1beta1.JWTRule{}
	for _, rule := range r.Spec.Rules {
		if rule.JWT == nil {
			continue
		}
		existing, ok := byIssuer[rule.JWT.Issuer]
		if !ok {
			byIssuer[rule.JWT.Issuer] = &securityv1beta1.JWTRule{
				Issuer: rule.JWT.Issuer, JwksUri: rule.JWT.JWKSURI, ForwardOriginalToken: true,
			}
			continue
		}
		if existing.JwksUri != rule.JWT.JWKSURI {
			return nil, fmt.Errorf("rules for path %s use issuer %s with jwksUri %s, but another rule uses %s: one issuer needs one key set",
				rule.Path, rule.JWT.Issuer, rule.JWT.JWKSURI, existing.JwksUri)
		}
	}
	var out []*securityv1beta1.JWTRule
	for _, issuer := range slices.Sorted(maps.Keys(byIssuer)) {
		out = append(out, byIssuer[issuer])
	}
	return out, nil
}
