package controller

import (
	"context"
	"fmt"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
)

// RedirectRoute is the HTTPRoute of the default Gateway API Gateway that
// redirects its HTTP listener to HTTPS.
const RedirectRoute = operatorv1alpha1.DefaultGatewayName + "-redirect"

// httpListener is the section name of the default Gateway API Gateway's
// HTTP listener, which only the redirect route may use.
const httpListener = "http"

// DesiredGatewayAPIGateway is the default gateway as a Gateway API
// Gateway: an HTTPS listener "https" for *.<domain> with the credential
// (routes of the namespaces RouteNamespaces selects, all without it), and
// an HTTP listener "http" for *.<domain> that admits routes of the
// gateway's own namespace only: the redirect. Every field the API server
// would default is written out, so the live Gateway compares equal.
//
// With a client mode, the Gateway validates client certificates
// gateway-wide (spec.tls.frontend.default, Core support) against the
// ConfigMap portico-gateway-client-ca: AllowValidOnly for Required,
// AllowInsecureFallback for Optional.
func DesiredGatewayAPIGateway(gw *operatorv1alpha1.APIGateway, c Config, credential string, clientMode operatorv1alpha1.ClientCertificateMode) *gwapiv1.Gateway {
	host := gwapiv1.Hostname("*." + c.Domain)
	https := &gwapiv1.RouteNamespaces{From: ptr.To(gwapiv1.NamespacesFromAll)}
	if c.RouteNamespaces != nil {
		https = &gwapiv1.RouteNamespaces{From: ptr.To(gwapiv1.NamespacesFromSelector), Selector: c.RouteNamespaces.DeepCopy()}
	}
	return &gwapiv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: gwapiv1.GroupVersion.String(), Kind: "Gateway"},
		ObjectMeta: objectMeta(gw, c.Namespace, operatorv1alpha1.DefaultGatewayName),
		Spec: gwapiv1.GatewaySpec{
			GatewayClassName: gwapiv1.ObjectName(c.ClassName),
			TLS:              frontendValidation(clientMode),
			Listeners: []gwapiv1.Listener{{
				Name: operatorv1alpha1.DefaultGatewayListener, Hostname: &host, Port: 443, Protocol: gwapiv1.HTTPSProtocolType,
				TLS: &gwapiv1.ListenerTLSConfig{Mode: ptr.To(gwapiv1.TLSModeTerminate), CertificateRefs: []gwapiv1.SecretObjectReference{{
					Group: ptr.To(gwapiv1.Group("")), Kind: ptr.To(gwapiv1.Kind("Secret")), Name: gwapiv1.ObjectName(credential),
				}}},
				AllowedRoutes: &gwapiv1.AllowedRoutes{Namespaces: https},
			}, {
				Name: httpListener, Hostname: &host, Port: 80, Protocol: gwapiv1.HTTPProtocolType,
				AllowedRoutes: &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: ptr.To(gwapiv1.NamespacesFromSame)}},
			}},
		},
	}
}

// frontendValidation is the Gateway's spec.tls for a client mode: nil for
// none.
func frontendValidation(clientMode operatorv1alpha1.ClientCertificateMode) *gwapiv1.GatewayTLSConfig {
	mode := gwapiv1.AllowValidOnly
	switch clientMode {
	case operatorv1alpha1.ClientCertificateRequired:
	case operatorv1alpha1.ClientCertificateOptional:
		mode = gwapiv1.AllowInsecureFallback
	default:
		return nil
	}
	return &gwapiv1.GatewayTLSConfig{Frontend: &gwapiv1.FrontendTLSConfig{Default: gwapiv1.TLSConfig{
		Validation: &gwapiv1.FrontendTLSValidation{
			CACertificateRefs: []gwapiv1.ObjectReference{{Group: "", Kind: "ConfigMap", Name: operatorv1alpha1.DefaultGatewayClientCAConfigMap}},
			Mode:              mode,
		},
	}}}
}

// DesiredRedirectRoute redirects every request of the HTTP listener to
// HTTPS, permanently.
func DesiredRedirectRoute(gw *operatorv1alpha1.APIGateway, c Config) *gwapiv1.HTTPRoute {
	return &gwapiv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gwapiv1.GroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: objectMeta(gw, c.Namespace, RedirectRoute),
		Spec: gwapiv1.HTTPRouteSpec{
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{
				Group: ptr.To(gwapiv1.Group(gwapiv1.GroupName)), Kind: ptr.To(gwapiv1.Kind("Gateway")),
				Name: operatorv1alpha1.DefaultGatewayName, SectionName: ptr.To(gwapiv1.SectionName(httpListener)),
			}}},
			Rules: []gwapiv1.HTTPRouteRule{{
				Matches: []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: ptr.To(gwapiv1.PathMatchPathPrefix), Value: ptr.To("/")}}},
				Filters: []gwapiv1.HTTPRouteFilter{{
					Type:            gwapiv1.HTTPRouteFilterRequestRedirect,
					RequestRedirect: &gwapiv1.HTTPRequestRedirectFilter{Scheme: ptr.To("https"), StatusCode: ptr.To(301)},
				}},
			}},
		},
	}
}

// gatewayAPICredential is the Secret the live Gateway API Gateway's HTTPS
// listener serves, or "".
func gatewayAPICredential(g *gwapiv1.Gateway) string {
	for _, l := range g.Spec.Listeners {
		if string(l.Name) == operatorv1alpha1.DefaultGatewayListener && l.TLS != nil && len(l.TLS.CertificateRefs) > 0 {
			return string(l.TLS.CertificateRefs[0].Name)
		}
	}
	return ""
}

// applyGatewayAPI writes the default Gateway API Gateway (moving it to the
// source's Secret only once that holds a valid certificate, as the Istio
// Gateway does) and its redirect route, removes the Istio mode's objects,
// and returns the credential served, the one kept meanwhile ("" if none),
// and why the Gateway is not Programmed yet ("" once it is).
func (r *Reconciler) applyGatewayAPI(ctx context.Context, gw *operatorv1alpha1.APIGateway, c Config, cert certificate, clientMode operatorv1alpha1.ClientCertificateMode) (credential, kept, pending string, err error) {
	live := &gwapiv1.Gateway{}
	err = r.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: operatorv1alpha1.DefaultGatewayName}, live)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return "", "", "", err
	case !metav1.IsControlledBy(live, gw):
		return "", "", "", &notOwnedError{"Gateway API Gateway", c.GatewayRef()}
	}
	credential = c.SecretName
	if !cert.valid && live != nil {
		if current := gatewayAPICredential(live); current != "" && current != c.SecretName && r.servable(ctx, c, current, r.Clock.Now()) {
			credential, kept = current, current
		}
	}
	desired := DesiredGatewayAPIGateway(gw, c, credential, clientMode)
	var liveObj client.Object
	if live != nil {
		liveObj = live
	}
	if err := r.write(ctx, gw, "Gateway API Gateway", desired, liveObj); err != nil {
		return "", "", "", err
	}
	if err := r.applyRedirect(ctx, gw, c); err != nil {
		return "", "", "", err
	}
	// The Istio mode's Gateway and health route go: one default gateway.
	if err := r.removeIstioMode(ctx, gw, c.Namespace); err != nil {
		return "", "", "", err
	}
	if live == nil || !equality.Semantic.DeepEqual(live.Spec, desired.Spec) {
		return credential, kept, notProgrammedYet(c), nil
	}
	return credential, kept, programmed(live, c), nil
}

// programmed returns "" when the Gateway's controller reports the Gateway
// Programmed at its generation, else what it said.
func programmed(g *gwapiv1.Gateway, c Config) string {
	cond := meta.FindStatusCondition(g.Status.Conditions, string(gwapiv1.GatewayConditionProgrammed))
	switch {
	case cond == nil || cond.ObservedGeneration < g.Generation:
		return notProgrammedYet(c)
	case cond.Status != metav1.ConditionTrue:
		return fmt.Sprintf("Gateway API Gateway %s is not programmed by the controller of class %s: %s: %s", c.GatewayRef(), c.ClassName,
			cond.Reason, contract.Truncate(cond.Message, 512))
	}
	return ""
}

// notProgrammedYet says that the Gateway's controller has not answered
// about the Gateway's current version.
func notProgrammedYet(c Config) string {
	return fmt.Sprintf("Gateway API Gateway %s is written; waiting for the controller of class %s to program it", c.GatewayRef(), c.ClassName)
}

func (r *Reconciler) applyRedirect(ctx context.Context, gw *operatorv1alpha1.APIGateway, c Config) error {
	return r.applyNamed(ctx, gw, "HTTPRoute", DesiredRedirectRoute(gw, c))
}

// removeIstioMode deletes the Istio Gateway and health VirtualService the
// controller wrote in namespace ns.
func (r *Reconciler) removeIstioMode(ctx context.Context, gw *operatorv1alpha1.APIGateway, ns string) error {
	if err := r.deleteOwned(ctx, gw, &networkingv1.Gateway{}, ns, operatorv1alpha1.DefaultGatewayName); err != nil {
		return err
	}
	return r.deleteOwned(ctx, gw, &networkingv1.VirtualService{}, ns, HealthVirtualService)
}

// removeGatewayAPIMode deletes the Gateway API Gateway and redirect route
// the controller wrote in namespace ns (when their CRDs are there).
func (r *Reconciler) removeGatewayAPIMode(ctx context.Context, gw *operatorv1alpha1.APIGateway, ns string) error {
	if !r.GatewayAPI {
		return nil
	}
	if err := r.deleteOwned(ctx, gw, &gwapiv1.Gateway{}, ns, operatorv1alpha1.DefaultGatewayName); err != nil {
		return err
	}
	return r.deleteOwned(ctx, gw, &gwapiv1.HTTPRoute{}, ns, RedirectRoute)
}
