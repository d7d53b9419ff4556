package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/access"
	"github.com/portico-dev/portico/controllers/apirule/internal/hosts"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
	"github.com/portico-dev/portico/controllers/apirule/internal/translate"
)

// clusterDomain completes Service host names.
const clusterDomain = "cluster.local"

// withdraws reports whether a refusal must take back what the APIRule
// wrote: the reference, or the host, is no longer the APIRule's to use, so
// leaving the old route in place would keep serving what was withdrawn.
func withdraws(reason string) bool {
	switch reason {
	case porticov1alpha1.ReasonReferenceNotPermitted, porticov1alpha1.ReasonBackendNotPermitted,
		porticov1alpha1.ReasonHostOccupied, porticov1alpha1.ReasonHostNotPermitted,
		porticov1alpha1.ReasonNoDefaultGateway, porticov1alpha1.ReasonHostNotOnGateway, porticov1alpha1.ReasonHostReserved,
		porticov1alpha1.ReasonAuthorizerNotPermitted:
		return true
	}
	return false
}

// refuse reports reason and removes every Istio object of the APIRule; the
// finalizer comes off once they are gone.
func (r *Reconciler) refuse(ctx context.Context, rule *porticov1alpha1.APIRule, reason, msg string) (ctrl.Result, error) {
	setReady(rule, metav1.ConditionFalse, reason, msg)
	if !controllerutil.ContainsFinalizer(rule, Finalizer) {
		// It wrote nothing since the finalizer came off; the cache finds
		// what an older version of the controller may have left.
		return ctrl.Result{}, r.deleteUnwanted(ctx, rule, r.Client, nil)
	}
	return r.release(ctx, rule)
}

// refuseInvalid reports InvalidRule for a Translate error. It leaves the
// live objects as they were, unless the rules would send headers or
// cookies in their callers' name (plan.ErrForgesRequest): an APIRule
// Applied before that check existed would otherwise keep a route that
// sends them.
func (r *Reconciler) refuseInvalid(ctx context.Context, rule *porticov1alpha1.APIRule, err error) (ctrl.Result, error) {
	if errors.Is(err, plan.ErrForgesRequest) {
		return r.refuse(ctx, rule, porticov1alpha1.ReasonInvalidRule, err.Error())
	}
	setReady(rule, metav1.ConditionFalse, porticov1alpha1.ReasonInvalidRule, err.Error()+"; the objects were left unchanged")
	return ctrl.Result{}, nil
}

// checkHosts returns why the APIRule may not serve its hosts: a wildcard
// that grants (the APIGateway's spec.apiRules) do not give its namespace,
// or a host an older APIRule claims.
func (r *Reconciler) checkHosts(ctx context.Context, rule *porticov1alpha1.APIRule, grants *operatorv1alpha1.APIRulesSpec) (string, string, error) {
	var others []hosts.Claim
	seen := map[types.UID]bool{}
	// The host index narrows the APIRules to those whose hosts may overlap
	// (the same host, a wildcard over one, a host under a wildcard): with a
	// whole company's APIRules under one domain, listing that domain's
	// would make every reconcile read all of them.
	for _, key := range overlapKeys(rule) {
		var rules porticov1alpha1.APIRuleList
		if err := r.Client.List(ctx, &rules, client.MatchingFields{hostIndex: key}, client.UnsafeDisableDeepCopy); err != nil {
			return "", "", fmt.Errorf("list the APIRules that may claim %s: %w", key[2:], err)
		}
		for i := range rules.Items {
			o := &rules.Items[i]
			// An APIRule being deleted keeps its claim while it holds the
			// finalizer: until its objects are gone (the finalizer comes
			// off only then), the next claimant waits, so two tenants'
			// routes are never live for one host.
			if seen[o.UID] || (!o.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(o, Finalizer)) || !hostsOverlap(rule, o) {
				continue
			}
			seen[o.UID] = true
			others = append(others, claimOf(o))
		}
	}
	v := hosts.Decide(claimOf(rule), others, grantsOf(grants))
	switch v.Reason {
	case hosts.NotPermitted:
		return porticov1alpha1.ReasonHostNotPermitted, v.Message + "; the APIRule's Istio objects were removed", nil
	case hosts.Occupied:
		return porticov1alpha1.ReasonHostOccupied, v.Message + "; the APIRule's Istio objects were removed", nil
	}
	return "", "", nil
}

// grantsOf is what the administrator gave namespaces, for hosts.Decide.
func grantsOf(spec *operatorv1alpha1.APIRulesSpec) hosts.Grants {
	if spec == nil {
		return hosts.Grants{}
	}
	g := hosts.Grants{Wildcard: spec.Grants}
	for _, o := range spec.OwnedHosts {
		g.Owned = append(g.Owned, hosts.Ownership{Host: o.Host, Namespaces: o.Namespaces})
	}
	return g
}

// reservedHost returns the host of the APIRule that Portico reserves for
// itself, or "": the default gateway's health host, on any gateway. Istio
// merges the routes of one host on a gateway's pods, and any Gateway of any
// namespace may select the default gateway's pods, so a claim on another
// gateway could take over the health check as well as one on the default
// gateway.
func reservedHost(rule *porticov1alpha1.APIRule, gw *operatorv1alpha1.APIGateway) string {
	_, domain, ok := gw.DefaultGateway()
	if !ok || domain == "" {
		return ""
	}
	health := operatorv1alpha1.DefaultGatewayHealthHost + "." + strings.ToLower(domain)
	for _, h := range rule.Spec.Hosts {
		if strings.EqualFold(string(h), health) {
			return string(h)
		}
	}
	return ""
}

// apiGateway reads what the cluster administrator configured: the
// APIGateway, or nil without one (or when grants are not read).
func (r *Reconciler) apiGateway(ctx context.Context) (*operatorv1alpha1.APIGateway, error) {
	if !r.Installed.APIGateways {
		return nil, nil
	}
	gw := &operatorv1alpha1.APIGateway{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the APIGateway: %w", err)
	}
	return gw, nil
}

// gatewayOf returns the Istio Gateway, as <namespace>/<name>, that serves
// the APIRule: the one it names or, when it names none, the default gateway
// of the APIGateway (APIGateway.DefaultGateway). On the default gateway,
// named or not, every host must be directly under its domain and not its
// health host. Otherwise it returns the reason and message of the refusal.
func gatewayOf(rule *porticov1alpha1.APIRule, gw *operatorv1alpha1.APIGateway) (gateway string, parent *porticov1alpha1.ParentReference, reason, msg string) {
	if rule.Spec.ParentRef != nil {
		return "", plan.Parent(rule), "", "" // HTTPRoute mode: no Istio Gateway
	}
	def, domain, ok := gw.DefaultGateway()
	gateway = rule.Spec.Gateway
	if gateway == "" {
		if !ok {
			return "", nil, porticov1alpha1.ReasonNoDefaultGateway,
				"the APIRule names no gateway (spec.gateway) and the APIGateway has no enabled default gateway (its spec.gateway) to use instead: " +
					"name an Istio Gateway, as <namespace>/<name>; the APIRule's Istio objects were removed"
		}
		gateway = def
	}
	if !ok || gateway != def {
		return gateway, nil, "", ""
	}
	// On the default gateway, named or not, the administrator's domain
	// bounds the hosts, and its health host is the gateway's own.
	for _, h := range rule.Spec.Hosts {
		if !hostOnDomain(string(h), domain) {
			return "", nil, porticov1alpha1.ReasonHostNotOnGateway, fmt.Sprintf(
				"host %s is not a name directly under the domain %s, so the default gateway %s, which serves *.%s, would not serve it: "+
					"use a host such as api.%s, or name a gateway that serves it; the APIRule's Istio objects were removed",
				h, domain, gateway, domain, domain)
		}
	}
	if gw.DefaultGatewayAPI() && rule.Spec.Gateway == "" {
		// The default gateway is a Gateway API Gateway: HTTPRoute mode on
		// its https listener.
		ns, name, _ := strings.Cut(def, "/")
		return "", &porticov1alpha1.ParentReference{Group: porticov1alpha1.GatewayAPIGroup, Kind: "Gateway", Namespace: ns, Name: name,
			SectionName: operatorv1alpha1.DefaultGatewayListener}, "", ""
	}
	return gateway, nil, "", ""
}

// hostOnDomain reports whether host is a name the default gateway of domain
// serves with its *.<domain> certificate, which covers exactly one label
// before the domain ("api.example.com" for "example.com"): not the domain
// itself, not a name with more labels, not a wildcard. The administrator
// grants these names by setting the domain.
func hostOnDomain(host, domain string) bool {
	if domain == "" {
		return false
	}
	label, ok := strings.CutSuffix(strings.ToLower(host), "."+strings.ToLower(domain))
	return ok && label != "" && !strings.ContainsAny(label, ".*")
}

// hostsOverlap reports whether two APIRules claim a host in common.
func hostsOverlap(a, b *porticov1alpha1.APIRule) bool {
	for _, h := range a.Spec.Hosts {
		for _, o := range b.Spec.Hosts {
			if hosts.Overlap(string(h), string(o)) {
				return true
			}
		}
	}
	return false
}

func claimOf(rule *porticov1alpha1.APIRule) hosts.Claim {
	c := hosts.Claim{APIRule: client.ObjectKeyFromObject(rule), UID: rule.UID, Created: rule.CreationTimestamp.Time}
	for _, h := range rule.Spec.Hosts {
		c.Hosts = append(c.Hosts, string(h))
	}
	return c
}

// aliasOf explains how a Service would send traffic somewhere else than
// its own namespace's pods that its selector picks, or returns "".
func (r *Reconciler) aliasOf(ctx context.Context, svc *corev1.Service) (string, error) {
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return "is of type ExternalName (an alias of " + svc.Spec.ExternalName + ")", nil
	case len(svc.Spec.Selector) == 0:
		return "has no pod selector (its endpoints may be anything)", nil
	}
	var slices discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &slices, client.MatchingFields{endpointSliceIndex: svc.Namespace + "/" + svc.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return "", fmt.Errorf("list the endpoints of service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if name, found := sliceNotOfPods(slices.Items, svc.Namespace); found {
		return "has endpoints that are not pods of its own namespace (EndpointSlice " + name + ")", nil
	}
	if r.Installed.WorkloadEntries {
		// Istio also sends a Service's traffic to the WorkloadEntries of its
		// namespace that its selector picks: addresses anyone may write there.
		var workloads networkingv1.WorkloadEntryList
		if err := r.Client.List(ctx, &workloads, client.InNamespace(svc.Namespace), client.MatchingLabels(svc.Spec.Selector), client.UnsafeDisableDeepCopy); err != nil {
			return "", fmt.Errorf("list the WorkloadEntries of namespace %s: %w", svc.Namespace, err)
		}
		if len(workloads.Items) > 0 {
			return "selects WorkloadEntry " + workloads.Items[0].Name + " (an address that is not a pod)", nil
		}
	}
	if !r.Installed.ServiceEntries {
		return "", nil
	}
	// The host index narrows the ServiceEntries to those with one of the
	// Service's names or a wildcard over one.
	for _, key := range serviceEntryLookupKeys(svc) {
		var entries networkingv1.ServiceEntryList
		if err := r.Client.List(ctx, &entries, client.MatchingFields{serviceEntryHostIndex: key}, client.UnsafeDisableDeepCopy); err != nil {
			return "", fmt.Errorf("list the ServiceEntries of host %s: %w", key[2:], err)
		}
		for i := range entries.Items {
			if h := declaredHost(entries.Items[i], svc); h != "" {
				return "has a host that a ServiceEntry also declares (" + h + ")", nil
			}
		}
	}
	return "", nil
}

// serviceHostNames are the names under which Istio knows a Service.
func serviceHostNames(svc *corev1.Service) []string {
	base := svc.Name + "." + svc.Namespace
	return []string{base + ".svc." + clusterDomain, base + ".svc", base}
}

// checkAccess refuses an APIRule whose access control would meet, on
// pods both may reach, the live access control of another APIRule of the
// namespace with other authentication (or another key set for an issuer).
// Istio adds up a workload's policies, so either would open what the other
// guards. When this APIRule's own live objects already meet the other's
// (written concurrently, or before the other), the newer one gives way and
// removes its objects; the older one stays.
func (r *Reconciler) checkAccess(ctx context.Context, rule *porticov1alpha1.APIRule, out translate.Output) (string, error) {
	ownAPs, otherAPs, ownRAs, otherRAs, err := r.livePolicies(ctx, rule)
	if err != nil {
		return "", err
	}
	msg := ""
	for _, w := range out.Workloads {
		msg = firstConflict(w.AuthorizationPolicy, w.RequestAuthentication, otherAPs, otherRAs)
		if msg == "" {
			msg = customConflict(access.Access{Allow: w.AuthorizationPolicy, Custom: w.CustomPolicy}, accessSets(otherAPs))
		}
		if msg != "" {
			break
		}
	}
	if msg == "" {
		return "", nil
	}
	for _, ap := range ownAPs {
		if c := firstConflict(ap, nil, olderThan(ap, otherAPs), nil); c != "" {
			return msg + "; this APIRule's live objects met older ones and were removed", r.deleteUnwanted(ctx, rule, r.Client, nil)
		}
	}
	for _, own := range accessSets(ownAPs) {
		first := own.Allow
		if first == nil {
			first = own.Custom
		}
		if c := customConflict(own, accessSets(olderThan(first, otherAPs))); c != "" {
			return msg + "; this APIRule's live objects met older ones and were removed", r.deleteUnwanted(ctx, rule, r.Client, nil)
		}
	}
	for _, ra := range ownRAs {
		if c := firstConflict(nil, ra, nil, olderThan(ra, otherRAs)); c != "" {
			return msg + "; this APIRule's live objects met older ones and were removed", r.deleteUnwanted(ctx, rule, r.Client, nil)
		}
	}
	return msg + "; nothing was written, the live Istio objects were left unchanged", nil
}

func firstConflict(ap *securityv1.AuthorizationPolicy, ra *securityv1.RequestAuthentication, aps []*securityv1.AuthorizationPolicy, ras []*securityv1.RequestAuthentication) string {
	if ap != nil {
		for _, other := range aps {
			if c := access.AuthorizationConflict(ap, other); c != "" {
				return c + "; another APIRule's live AuthorizationPolicy guards those requests"
			}
		}
	}
	if ra != nil {
		for _, other := range ras {
			if c := access.AuthenticationConflict(ra, other); c != "" {
				return c
			}
		}
	}
	return ""
}

func isOlder(a, b metav1.Object) bool {
	ta, tb := a.GetCreationTimestamp().Time, b.GetCreationTimestamp().Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.GetName() < b.GetName()
}

// olderThan returns the objects of others that are older than self.
func olderThan[T metav1.Object](self T, others []T) []T {
	var out []T
	for _, o := range others {
		if isOlder(o, self) {
			out = append(out, o)
		}
	}
	return out
}

// livePolicies reads the access control the controller keeps in the
// APIRule's namespace, split into this APIRule's and the others'.
func (r *Reconciler) livePolicies(ctx context.Context, rule *porticov1alpha1.APIRule) (own, other []*securityv1.AuthorizationPolicy, ownRA, otherRA []*securityv1.RequestAuthentication, err error) {
	// The namespace's policies, not an index of them: two selectors may
	// meet on a pod without a label in common ({app: a} and {tier: b}), so
	// no key of one policy's selector finds every policy it may meet. A
	// namespace holds one tenant's APIRules, however many the cluster has.
	managed := client.MatchingLabels{plan.LabelManagedBy: plan.ManagedBy}
	var aps securityv1.AuthorizationPolicyList
	// Read-only: share the cache's objects rather than copy every policy.
	if err := r.Client.List(ctx, &aps, client.InNamespace(rule.Namespace), managed, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("list the AuthorizationPolicies of namespace %s: %w", rule.Namespace, err)
	}
	var ras securityv1.RequestAuthenticationList
	if err := r.Client.List(ctx, &ras, client.InNamespace(rule.Namespace), managed, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("list the RequestAuthentications of namespace %s: %w", rule.Namespace, err)
	}
	for _, ap := range aps.Items {
		if owns(rule, ap) {
			own = append(own, ap)
		} else if ap.DeletionTimestamp.IsZero() {
			other = append(other, ap)
		}
	}
	for _, ra := range ras.Items {
		if owns(rule, ra) {
			ownRA = append(ownRA, ra)
		} else if ra.DeletionTimestamp.IsZero() {
			otherRA = append(otherRA, ra)
		}
	}
	return own, other, ownRA, otherRA, nil
}

// trustedProxies is the administrator's count of proxies in front of the
// gateways (spec.apiRules.trustedProxies), nil when not set: rules with
// clientAddresses are refused until it is.
func trustedProxies(grants *operatorv1alpha1.APIRulesSpec) *int32 {
	if grants == nil {
		return nil
	}
	return grants.TrustedProxies
}

// sliceNotOfPods returns the first of a Service's EndpointSlices with an
// endpoint that is not a pod of the Service's namespace.
func sliceNotOfPods(slices []discoveryv1.EndpointSlice, namespace string) (string, bool) {
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if notPodOfNamespace(ep.TargetRef, namespace) {
				return s.Name, true
			}
		}
	}
	return "", false
}
