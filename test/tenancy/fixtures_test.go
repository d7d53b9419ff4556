package tenancy

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Identity providers: team-a's, and keys and an issuer of team-b's.
const (
	issuerA = "https://idp.team-a.example"
	keysA   = "https://idp.team-a.example/jwks.json"
	issuerB = "https://idp.team-b.example"
	keysB   = "https://keys.team-b.example/jwks.json"
)

// create creates obj as the given user (a tenant, or admin) and deletes it
// as the administrator when the test ends (with what was written for it,
// for an APIRule).
func create(t *testing.T, as client.Client, obj client.Object) {
	t.Helper()
	NewWithT(t).Expect(as.Create(context.Background(), obj)).To(Succeed(), "create %T %s/%s", obj, obj.GetNamespace(), obj.GetName())
	t.Cleanup(func() {
		ctx := context.Background()
		_ = client.IgnoreNotFound(admin.Delete(ctx, obj))
		if rule, ok := obj.(*gatewayv1alpha1.APIRule); ok {
			collectGarbage(t, rule)
		}
	})
}

// istioKinds are the kinds the apirule controller writes (Istio's, and
// the Gateway API's HTTPRoute).
var istioKinds = []schema.GroupVersionKind{
	networkingv1.SchemeGroupVersion.WithKind("VirtualService"),
	securityv1.SchemeGroupVersion.WithKind("AuthorizationPolicy"),
	securityv1.SchemeGroupVersion.WithKind("RequestAuthentication"),
	{Group: gatewayapiv1.GroupName, Version: "v1", Kind: "HTTPRoute"},
}

// collectGarbage deletes what was written for a deleted APIRule, as the
// garbage collector (which envtest does not run) would for the objects it
// owns. It reads metadata only, so undecodable objects go too.
func collectGarbage(t *testing.T, rule *gatewayv1alpha1.APIRule) {
	t.Helper()
	ctx := context.Background()
	for _, gvk := range istioKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := admin.List(ctx, list, client.MatchingLabels{labelAPIRule: rule.Name, labelAPIRuleNamespace: rule.Namespace}); err != nil {
			t.Logf("collect the garbage of APIRule %s/%s: %v", rule.Namespace, rule.Name, err)
			continue
		}
		for i := range list.Items {
			obj := &list.Items[i]
			obj.SetGroupVersionKind(gvk)
			_ = client.IgnoreNotFound(admin.Delete(ctx, obj))
		}
	}
}

// update re-reads obj and applies mutate until the write succeeds.
func update[T client.Object](t *testing.T, as client.Client, obj T, mutate func(T)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := as.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return as.Update(context.Background(), obj)
	}, eventually, poll).Should(Succeed())
}

type serviceOption func(*corev1.Service)

// service is an ordinary Service selecting the pods labelled app=<name>.
func service(ns, name string, opts ...serviceOption) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, o := range opts {
		o(svc)
	}
	return svc
}

// consentingTo annotates the Service to let APIRules of namespaces route to it.
func consentingTo(namespaces string) serviceOption {
	return func(s *corev1.Service) {
		s.Annotations = map[string]string{gatewayv1alpha1.AnnotationAllowedAPIRuleNamespaces: namespaces}
	}
}

// externalName makes the Service a DNS alias of host.
func externalName(host string) serviceOption {
	return func(s *corev1.Service) {
		s.Spec.Type, s.Spec.ExternalName, s.Spec.Selector = corev1.ServiceTypeExternalName, host, nil
	}
}

func withoutSelector() serviceOption {
	return func(s *corev1.Service) { s.Spec.Selector = nil }
}

// workloadPod creates a pod of a workload, as its Deployment and the
// kubelet would (envtest has neither), with a pod IP.
func workloadPod(t *testing.T, ns, name string, labels map[string]string, ip string) *corev1.Pod {
	t.Helper()
	g := NewWithT(t)
	pod := ingressPod(ns, name, labels)
	pod.Spec.Containers[0].Image = "registry.example/app:1"
	create(t, admin, pod)
	if ip != "" {
		pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		g.Expect(admin.Status().Update(context.Background(), pod)).To(Succeed())
	}
	return pod
}

func backend(ns, name string) *gatewayv1alpha1.ServiceReference {
	return &gatewayv1alpha1.ServiceReference{Name: name, Namespace: ns, Port: 8080}
}

// apiRule exposes a Service on one host of a gateway.
func apiRule(ns, name, host, gateway string, svc *gatewayv1alpha1.ServiceReference, rules ...gatewayv1alpha1.Rule) *gatewayv1alpha1.APIRule {
	return &gatewayv1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gatewayv1alpha1.APIRuleSpec{
			Hosts:   []gatewayv1alpha1.Hostname{gatewayv1alpha1.Hostname(host)},
			Gateway: gateway,
			Service: svc,
			Rules:   rules,
		},
	}
}

func noAuth(path string) gatewayv1alpha1.Rule {
	return gatewayv1alpha1.Rule{Path: path, NoAuth: ptr.To(true)}
}

func jwt(path, issuer, jwksURI string) gatewayv1alpha1.Rule {
	return gatewayv1alpha1.Rule{Path: path, JWT: &gatewayv1alpha1.JWTAuthentication{Issuer: issuer, JWKSURI: jwksURI}}
}

// severalIssuers is a jwt rule in the list form, trusting every issuer.
func severalIssuers(path string, issuers ...gatewayv1alpha1.JWTIssuer) gatewayv1alpha1.Rule {
	return gatewayv1alpha1.Rule{Path: path, JWT: &gatewayv1alpha1.JWTAuthentication{Authentications: issuers}}
}

type issuerOption func(*gatewayv1alpha1.JWTIssuer)

func jwtIssuer(issuer, jwksURI string, opts ...issuerOption) gatewayv1alpha1.JWTIssuer {
	iss := gatewayv1alpha1.JWTIssuer{Issuer: issuer, JWKSURI: jwksURI}
	for _, o := range opts {
		o(&iss)
	}
	return iss
}

func inHeader(name, prefix string) issuerOption {
	return func(i *gatewayv1alpha1.JWTIssuer) {
		i.FromHeaders = append(i.FromHeaders, gatewayv1alpha1.JWTHeader{Name: name, Prefix: prefix})
	}
}

func inParam(name string) issuerOption {
	return func(i *gatewayv1alpha1.JWTIssuer) { i.FromParams = append(i.FromParams, name) }
}

// protectedAPI is the rules of team-a's APIs: /health open, /admin for
// tokens of team-a's issuer.
func protectedAPI() []gatewayv1alpha1.Rule {
	health := noAuth("/health")
	health.Methods = []gatewayv1alpha1.HTTPMethod{"GET"}
	return []gatewayv1alpha1.Rule{health, jwt("/admin", issuerA, keysA)}
}

func rateLimit(ns, name string, kind gatewayv1alpha1.TargetKind, target string, maxTokens int64) *gatewayv1alpha1.RateLimit {
	return &gatewayv1alpha1.RateLimit{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gatewayv1alpha1.RateLimitSpec{
			TargetRef: gatewayv1alpha1.TargetReference{Kind: kind, Name: target},
			Local:     &gatewayv1alpha1.TokenBucket{MaxTokens: maxTokens, TokensPerFill: 1, FillInterval: metav1.Duration{Duration: time.Second}},
		},
	}
}
