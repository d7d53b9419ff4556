package controller

import (
	"fmt"
	"slices"
	"strings"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// Labels on every object the controller creates.
const (
	// LabelManagedBy is app.kubernetes.io/managed-by; the cache holds only
	// the Gateways, VirtualServices and Certificates that carry ManagedBy.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy on the controller's objects.
	ManagedBy = "portico-gateway-controller"
)

// Names of the objects of each certificate source, in the gateway's
// namespace. Each source has its own Secret, so switching sources never
// overwrites the Secret the Gateway serves: the Gateway moves to the new
// Secret only once it holds a valid certificate.
const (
	// SelfSignedSecret holds the selfSigned serving certificate.
	SelfSignedSecret = operatorv1alpha1.DefaultGatewayName + "-tls"
	// CASecret holds the selfSigned CA and its key.
	CASecret = operatorv1alpha1.DefaultGatewayName + "-ca"
	// CertManagerSecret is where cert-manager writes the certManager certificate.
	CertManagerSecret = operatorv1alpha1.DefaultGatewayName + "-cert-manager-tls"
	// HealthVirtualService answers the gateway's health check.
	HealthVirtualService = operatorv1alpha1.DefaultGatewayName + "-health"
)

// Source is a certificate source of spec.gateway.certificate.
type Source string

// The certificate sources.
const (
	SourceSelfSigned  Source = "selfSigned"
	SourceCertManager Source = "certManager"
	SourceSecretName  Source = "secretName"
)

// Config is the default gateway the spec asks for, defaults applied.
type Config struct {
	Domain    string
	Namespace string
	Selector  map[string]string
	Source    Source
	// SecretName is the Secret the source delivers its certificate in.
	SecretName string
	// IssuerRef is the cert-manager issuer (SourceCertManager).
	IssuerRef operatorv1alpha1.IssuerReference
	// Validity of the selfSigned serving certificate.
	Validity metav1.Duration
	// GatewayAPI makes the gateway a Gateway API Gateway of ClassName,
	// admitting routes of the namespaces RouteNamespaces selects (all when
	// nil) on its HTTPS listener.
	GatewayAPI      bool
	ClassName       string
	RouteNamespaces *metav1.LabelSelector
	// ClientMode is the client certificate the gateway asks for (Required,
	// Optional, or "" for none), with the CAs of ClientCA.
	ClientMode operatorv1alpha1.ClientCertificateMode
	ClientCA   operatorv1alpha1.ClientCABundle
}

// ConfigFor applies the API's defaults to an enabled spec (as the API
// server does, for objects written before a default existed).
func ConfigFor(spec *operatorv1alpha1.GatewaySpec) Config {
	c := Config{Domain: spec.Domain, Namespace: spec.Namespace, Selector: spec.Selector, Source: SourceSelfSigned, SecretName: SelfSignedSecret}
	if c.Namespace == "" {
		c.Namespace = operatorv1alpha1.DefaultGatewayNamespace
	}
	if len(c.Selector) == 0 {
		c.Selector = map[string]string{"istio": "ingressgateway"}
	}
	c.Validity = metav1.Duration{Duration: 90 * 24 * time.Hour}
	if g := spec.GatewayAPI; g != nil {
		c.GatewayAPI, c.ClassName, c.RouteNamespaces = true, g.GatewayClassName, g.RouteNamespaces
		if c.ClassName == "" {
			c.ClassName = operatorv1alpha1.DefaultGatewayClassName
		}
	}
	if cc := spec.ClientCertificates; cc != nil {
		c.ClientMode, c.ClientCA = cc.Mode, cc.CABundle
		if c.ClientMode == "" {
			c.ClientMode = operatorv1alpha1.ClientCertificateRequired
		}
	}
	cert := spec.Certificate
	switch {
	case cert != nil && cert.CertManager != nil:
		c.Source, c.SecretName, c.IssuerRef = SourceCertManager, CertManagerSecret, cert.CertManager.IssuerRef
		if c.IssuerRef.Kind == "" {
			c.IssuerRef.Kind = "Issuer"
		}
		if c.IssuerRef.Group == "" {
			c.IssuerRef.Group = "cert-manager.io"
		}
	case cert != nil && cert.SecretName != "":
		c.Source, c.SecretName = SourceSecretName, cert.SecretName
	case cert != nil && cert.SelfSigned != nil && cert.SelfSigned.Validity != nil:
		c.Validity = *cert.SelfSigned.Validity
	}
	return c
}

// Hosts the gateway serves.
func (c Config) Hosts() []string { return []string{"*." + c.Domain} }

// HealthHost is the host of the health VirtualService.
func (c Config) HealthHost() string {
	return operatorv1alpha1.DefaultGatewayHealthHost + "." + c.Domain
}

// GatewayRef is the gateway as APIRules name it, <namespace>/<name>.
func (c Config) GatewayRef() string {
	return c.Namespace + "/" + operatorv1alpha1.DefaultGatewayName
}

// owner is the controller reference every object points to: the APIGateway,
// so deleting it removes them, and so the controller can tell its objects
// from others of the same name.
func owner(gw *operatorv1alpha1.APIGateway) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: operatorv1alpha1.GroupVersion.String(), Kind: "APIGateway",
		Name: gw.Name, UID: gw.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false),
	}
}

func objectMeta(gw *operatorv1alpha1.APIGateway, namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: namespace, Name: name,
		Labels: map[string]string{
			LabelManagedBy:                   ManagedBy,
			"app.kubernetes.io/part-of":      operatorv1alpha1.PartOf,
			"app.kubernetes.io/component":    "default-gateway",
			operatorv1alpha1.LabelController: string(operatorv1alpha1.ControllerGateway),
		},
		OwnerReferences: []metav1.OwnerReference{owner(gw)},
	}
}

// ClientCACredentialName is the Istio Gateway's caCertCredentialName for
// the ConfigMap portico-gateway-client-ca of namespace ns:
// configmap://NS/NAME. Istio reads a bare name as a Secret (its SDS name
// kubernetes://NAME), never as a ConfigMap: only the configmap:// form
// makes istiod serve the ConfigMap's ca.crt as the client CAs, the form
// its own Gateway API conversion writes for a ConfigMap reference.
func ClientCACredentialName(ns string) string {
	return "configmap://" + ns + "/" + operatorv1alpha1.DefaultGatewayClientCAConfigMap
}

// DesiredGateway is the Istio Gateway: HTTPS on 443 with the credential,
// HTTP on 80 redirected to HTTPS, both for *.<domain>. With a client mode
// (Required or Optional), HTTPS is mutual TLS (MUTUAL or OPTIONAL_MUTUAL)
// and the client CAs are the ConfigMap portico-gateway-client-ca
// (caCertCredentialName ClientCACredentialName, which takes precedence
// over a ca.crt in the credential: the selfSigned Secret has the gateway's
// own CA there).
func DesiredGateway(gw *operatorv1alpha1.APIGateway, c Config, credential string, clientMode operatorv1alpha1.ClientCertificateMode) *networkingv1.Gateway {
	tls := &networkingapi.ServerTLSSettings{Mode: networkingapi.ServerTLSSettings_SIMPLE, CredentialName: credential}
	switch clientMode {
	case operatorv1alpha1.ClientCertificateRequired:
		tls.Mode, tls.CaCertCredentialName = networkingapi.ServerTLSSettings_MUTUAL, ClientCACredentialName(c.Namespace)
	case operatorv1alpha1.ClientCertificateOptional:
		tls.Mode, tls.CaCertCredentialName = networkingapi.ServerTLSSettings_OPTIONAL_MUTUAL, ClientCACredentialName(c.Namespace)
	}
	return &networkingv1.Gateway{
		ObjectMeta: objectMeta(gw, c.Namespace, operatorv1alpha1.DefaultGatewayName),
		Spec: networkingapi.Gateway{
			Selector: c.Selector,
			Servers: []*networkingapi.Server{
				{
					Port:  &networkingapi.Port{Number: 443, Name: "https", Protocol: "HTTPS"},
					Hosts: c.Hosts(),
					Tls:   tls,
				},
				{
					Port:  &networkingapi.Port{Number: 80, Name: "http", Protocol: "HTTP"},
					Hosts: c.Hosts(),
					Tls:   &networkingapi.ServerTLSSettings{HttpsRedirect: true},
				},
			},
		},
	}
}

// DesiredHealth is the health VirtualService: 200 "ok" at
// https://healthz.<domain>/healthz/ready, answered by the gateway itself.
func DesiredHealth(gw *operatorv1alpha1.APIGateway, c Config) *networkingv1.VirtualService {
	return &networkingv1.VirtualService{
		ObjectMeta: objectMeta(gw, c.Namespace, HealthVirtualService),
		Spec: networkingapi.VirtualService{
			Hosts:    []string{c.HealthHost()},
			Gateways: []string{c.GatewayRef()},
			Http: []*networkingapi.HTTPRoute{{
				Name:  "health",
				Match: []*networkingapi.HTTPMatchRequest{{Uri: &networkingapi.StringMatch{MatchType: &networkingapi.StringMatch_Exact{Exact: operatorv1alpha1.DefaultGatewayHealthPath}}}},
				DirectResponse: &networkingapi.HTTPDirectResponse{
					Status: 200,
					Body:   &networkingapi.HTTPBody{Specifier: &networkingapi.HTTPBody_String_{String_: "ok\n"}},
				},
			}},
		},
	}
}

// DesiredCertificate is the cert-manager Certificate of the certManager source.
func DesiredCertificate(gw *operatorv1alpha1.APIGateway, c Config) *cmv1.Certificate {
	return &cmv1.Certificate{
		ObjectMeta: objectMeta(gw, c.Namespace, operatorv1alpha1.DefaultGatewayName),
		Spec: cmv1.CertificateSpec{
			SecretName: CertManagerSecret,
			DNSNames:   []string{"*." + c.Domain, c.Domain},
			IssuerRef:  cmmeta.IssuerReference{Name: c.IssuerRef.Name, Kind: c.IssuerRef.Kind, Group: c.IssuerRef.Group},
			PrivateKey: &cmv1.CertificatePrivateKey{Algorithm: cmv1.ECDSAKeyAlgorithm, Size: 256, RotationPolicy: cmv1.RotationPolicyAlways},
			SecretTemplate: &cmv1.CertificateSecretTemplate{Labels: map[string]string{
				LabelManagedBy: ManagedBy, operatorv1alpha1.LabelController: string(operatorv1alpha1.ControllerGateway),
			}},
		},
	}
}

// CertificateReady returns whether cert-manager reports the Certificate
// Ready, and its condition's message.
func CertificateReady(cert *cmv1.Certificate) (bool, string) {
	for _, c := range cert.Status.Conditions {
		if c.Type == cmv1.CertificateConditionReady {
			msg := c.Message
			if c.Reason != "" {
				msg = fmt.Sprintf("%s: %s", c.Reason, c.Message)
			}
			return c.Status == cmmeta.ConditionTrue, msg
		}
	}
	return false, "cert-manager has not reported on the Certificate yet"
}

// UsesDefault reports whether an APIRule whose spec.gateway is ref uses the
// default gateway gatewayRef: it names it, or names no gateway.
func UsesDefault(ref, gatewayRef string) bool {
	return ref == "" || ref == gatewayRef
}

// InUseMessage names the APIRules that keep a disabled gateway, as many as
// fit in limit bytes, and how many more there are.
func InUseMessage(gatewayRef string, users []string, limit int) string {
	slices.Sort(users)
	head := fmt.Sprintf("the default gateway is disabled but %d APIRule(s) still use %s; nothing is removed until they are gone or name another gateway: ", len(users), gatewayRef)
	var b strings.Builder
	b.WriteString(head)
	for i, u := range users {
		more := fmt.Sprintf(" (and %d more)", len(users)-i)
		sep := ""
		if i > 0 {
			sep = ", "
		}
		if b.Len()+len(sep)+len(u)+len(fmt.Sprintf(" (and %d more)", len(users)-i-1)) > limit {
			b.WriteString(more)
			return b.String()
		}
		b.WriteString(sep + u)
	}
	return b.String()
}
