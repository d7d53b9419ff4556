package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names of what the gateway controller runs for the default gateway, all in
// spec.gateway.namespace.
const (
	// DefaultGatewayName is the name of the default Istio Gateway, its
	// health VirtualService and, unless spec.gateway.certificate.secretName
	// names another, the TLS Secret (DefaultGatewayName + "-tls").
	DefaultGatewayName = "portico-gateway"
	// DefaultGatewayCAConfigMap is the ConfigMap that publishes the CA of
	// the selfSigned certificate (key ca.crt) for clients to trust.
	DefaultGatewayCAConfigMap = "portico-gateway-ca"
	// DefaultGatewayNamespace is spec.gateway.namespace's default: Istio's
	// ingress gateway pods run there, and Istio reads a Gateway's
	// credentialName Secret from its pods' namespace.
	DefaultGatewayNamespace = "istio-system"
	// DefaultGatewayHealthHost is the first label of the host the health
	// VirtualService answers on, healthz.<domain>; APIRules cannot claim it.
	DefaultGatewayHealthHost = "healthz"
	// DefaultGatewayHealthPath is the path the health VirtualService answers
	// 200 on, over HTTPS at healthz.<domain>.
	DefaultGatewayHealthPath = "/healthz/ready"
)

// GatewaySpec configures the default gateway: an Istio Gateway serving
// *.<domain> over HTTPS (HTTP redirected to HTTPS) with a certificate, run by
// the gateway controller. APIRules that name no gateway use it.
// +kubebuilder:validation:XValidation:rule="!has(self.enabled) || !self.enabled || (has(self.domain) && size(self.domain) > 0)",message="spec.gateway.domain is required while the gateway is enabled: the gateway serves *.<domain>"
type GatewaySpec struct {
	// enabled runs the default gateway. Setting it to false removes the
	// Gateway, its health VirtualService and the certificate Portico
	// created, but only once no APIRule uses the default gateway: until
	// then everything stays and the status names the APIRules.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// domain is the DNS domain of the gateway: it serves every host
	// *.<domain> and its certificate is for *.<domain>. By setting it the
	// cluster administrator grants the names under it to the APIRules on
	// the default gateway (each name still has one owner, the oldest
	// APIRule that claims it).
	// +optional
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$')",message="domain must be a lower-case DNS name with at least two labels, such as example.com, without a wildcard"
	Domain string `json:"domain,omitempty"`

	// namespace of the ingress gateway pods. The Gateway, its health
	// VirtualService, the certificate's Secret and the CA ConfigMap are
	// created there, since Istio reads the Secret a Gateway names from its
	// pods' namespace.
	// +optional
	// +kubebuilder:default=istio-system
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// selector are the labels of the ingress gateway pods the Gateway
	// binds to.
	// +optional
	// +kubebuilder:default={istio: ingressgateway}
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=16
	Selector map[string]string `json:"selector,omitempty"`

	// certificate is where the gateway's TLS certificate comes from: one of
	// selfSigned (the default), certManager or secretName.
	// +optional
	// +kubebuilder:default={selfSigned: {}}
	Certificate *GatewayCertificate `json:"certificate,omitempty"`

	// gatewayAPI makes the default gateway a Gateway API Gateway
	// (gateway.networking.k8s.io) instead of an Istio Gateway: the gateway
	// controller writes the Gateway portico-gateway with an HTTPS listener
	// "https" for *.<domain> (the same certificate sources) and an HTTP
	// listener "http" whose only route, portico-gateway-redirect, redirects
	// to HTTPS. The Gateway's controller (Istio for the class istio) runs
	// its pods in the gateway's namespace, so selector does not apply.
	// APIRules naming no gateway then become HTTPRoutes on its https
	// listener. Needs the Gateway API's Gateway and HTTPRoute CRDs (the
	// operator waits for them while this is set).
	// +optional
	GatewayAPI *DefaultGatewayAPI `json:"gatewayAPI,omitempty"`

	// clientCertificates makes the gateway ask every HTTPS client for a
	// certificate signed by one of the CAs of caBundle, on the whole
	// gateway (port 443, every host under the domain): mutual TLS. The
	// gateway controller copies the bundle into the ConfigMap
	// portico-gateway-client-ca in the gateway's namespace, which the
	// gateway reads (Istio Gateway: tls mode MUTUAL or OPTIONAL_MUTUAL with
	// caCertCredentialName; Gateway API Gateway: spec.tls.frontend). An
	// invalid or missing bundle is reported in status and changes nothing
	// the gateway already does. Unset, the gateway asks for no certificate.
	// +optional
	ClientCertificates *ClientCertificates `json:"clientCertificates,omitempty"`
}

// ClientCertificates configures the client certificates the default gateway
// asks for.
type ClientCertificates struct {
	// mode is Required (the default: a client without a certificate of the
	// bundle's CAs fails the TLS handshake) or Optional (a client without a
	// certificate is served; one that presents a certificate must present a
	// valid one). Optional is for a migration: it proves nothing about a
	// client, since APIRules cannot yet require a certificate per rule.
	// +optional
	// +kubebuilder:default=Required
	Mode ClientCertificateMode `json:"mode,omitempty"`

	// caBundle is the PEM bundle of the CAs whose client certificates the
	// gateway accepts, in the gateway's namespace.
	// +required
	CABundle ClientCABundle `json:"caBundle"`
}

// ClientCertificateMode is whether the default gateway requires a client
// certificate.
// +kubebuilder:validation:Enum=Required;Optional
type ClientCertificateMode string

// The client certificate modes.
const (
	// ClientCertificateRequired: a TLS handshake without a certificate
	// signed by a CA of the bundle fails (Istio MUTUAL; Gateway API
	// AllowValidOnly).
	ClientCertificateRequired ClientCertificateMode = "Required"
	// ClientCertificateOptional: a client may present no certificate; one
	// it presents must verify (Istio OPTIONAL_MUTUAL; Gateway API
	// AllowInsecureFallback, which implementations may relax further).
	ClientCertificateOptional ClientCertificateMode = "Optional"
)

// ClientCABundle names the object, in the gateway's namespace (only the
// cluster administrator writes there), that holds the CA bundle under the
// key ca.crt; exactly one field is set.
// +kubebuilder:validation:XValidation:rule="[has(self.configMapName), has(self.secretName)].filter(x, x).size() == 1",message="set exactly one CA bundle source: configMapName or secretName"
type ClientCABundle struct {
	// configMapName is a ConfigMap in the gateway's namespace with the PEM
	// CA bundle under ca.crt. The gateway controller may read it only if
	// the Helm value controllers.gateway.configMapNames lists it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'portico-gateway-client-ca' && self != 'portico-gateway-ca'",message="configMapName must not name a ConfigMap Portico writes (portico-gateway-client-ca, portico-gateway-ca)"
	ConfigMapName string `json:"configMapName,omitempty"`

	// secretName is a Secret in the gateway's namespace with the PEM CA
	// bundle under ca.crt (its other keys are not read). The gateway
	// controller may read it only if the Helm value
	// controllers.gateway.secretNames lists it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="!(self in ['portico-gateway-tls', 'portico-gateway-ca', 'portico-gateway-cert-manager-tls'])",message="secretName must not name a Secret Portico writes: the gateway's own CA signs no client certificates"
	SecretName string `json:"secretName,omitempty"`
}

// DefaultGatewayClientCAConfigMap is the ConfigMap (key ca.crt) in the
// gateway's namespace into which the gateway controller copies the CA bundle
// of spec.gateway.clientCertificates, and which the gateway reads.
const DefaultGatewayClientCAConfigMap = "portico-gateway-client-ca"

// DefaultGatewayAPI configures the default gateway as a Gateway API Gateway.
type DefaultGatewayAPI struct {
	// gatewayClassName of the Gateway: the class of the implementation that
	// runs it; istio, Istio's class, by default.
	// +optional
	// +kubebuilder:default=istio
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	GatewayClassName string `json:"gatewayClassName,omitempty"`

	// routeNamespaces selects, by their labels, the namespaces whose
	// HTTPRoutes (APIRules) may attach to the https listener; unset admits
	// every namespace. A namespace it does not select gets its routes
	// refused by the Gateway (the APIRule reports RouteNotAccepted).
	// +optional
	RouteNamespaces *metav1.LabelSelector `json:"routeNamespaces,omitempty"`
}

// DefaultGatewayListener is the section name of the default Gateway API
// Gateway's HTTPS listener, which APIRules naming no gateway attach to.
const DefaultGatewayListener = "https"

// DefaultGatewayClassName is the default gatewayClassName of the default
// Gateway API Gateway: Istio's.
const DefaultGatewayClassName = "istio"

// UsesGatewayAPI reports whether the enabled default gateway is a Gateway
// API Gateway.
func (g *GatewaySpec) UsesGatewayAPI() bool {
	return g.IsEnabled() && g.GatewayAPI != nil
}

// GatewayCertificate is the source of the default gateway's certificate;
// exactly one field is set.
// +kubebuilder:validation:XValidation:rule="[has(self.selfSigned), has(self.certManager), has(self.secretName)].filter(x, x).size() == 1",message="set exactly one certificate source: selfSigned, certManager or secretName"
type GatewayCertificate struct {
	// selfSigned has the gateway controller issue a CA for this cluster and
	// a wildcard serving certificate for *.<domain> signed by it (ECDSA
	// P-256), renewed well before expiry. The CA certificate is published in
	// the ConfigMap portico-gateway-ca (key ca.crt) in the gateway's
	// namespace, for clients to trust. Browsers will not trust it by
	// themselves: use certManager or secretName for public clients.
	// +optional
	SelfSigned *SelfSignedCertificate `json:"selfSigned,omitempty"`

	// certManager has cert-manager issue the certificate: the gateway
	// controller writes a cert-manager Certificate for *.<domain> signed by
	// issuerRef and reports its Ready condition. Needs cert-manager's
	// Certificate CRD (cert-manager.io/v1) installed.
	// +optional
	CertManager *CertManagerCertificate `json:"certManager,omitempty"`

	// secretName is a kubernetes.io/tls Secret of your own in the gateway's
	// namespace. The gateway controller checks it (present, a matching key
	// pair valid for *.<domain>, not expired) and reports what it finds; it
	// never modifies it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	SecretName string `json:"secretName,omitempty"`
}

// SelfSignedCertificate configures the certificate the gateway controller
// issues itself.
type SelfSignedCertificate struct {
	// validity of the serving certificate; it is renewed when two thirds of
	// it have passed. The CA is valid ten times as long.
	// +optional
	// +kubebuilder:default="2160h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h') && duration(self) <= duration('8760h')",message="validity must be between 1h and 8760h (one year)"
	Validity *metav1.Duration `json:"validity,omitempty"`
}

// CertManagerCertificate configures the cert-manager Certificate of the
// gateway.
type CertManagerCertificate struct {
	// issuerRef is the cert-manager Issuer (in the gateway's namespace) or
	// ClusterIssuer that signs the certificate.
	// +required
	IssuerRef IssuerReference `json:"issuerRef"`
}

// IssuerReference names a cert-manager issuer.
type IssuerReference struct {
	// name of the issuer.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// kind of the issuer: Issuer or ClusterIssuer.
	// +optional
	// +kubebuilder:default=Issuer
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	Kind string `json:"kind,omitempty"`

	// group of the issuer's API; cert-manager.io for cert-manager's own
	// issuers, another group for an external issuer.
	// +optional
	// +kubebuilder:default=cert-manager.io
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
}

// IsEnabled reports whether the default gateway is configured and enabled.
func (g *GatewaySpec) IsEnabled() bool {
	return g != nil && (g.Enabled == nil || *g.Enabled)
}

// UsesCertManager reports whether the enabled default gateway gets its
// certificate from cert-manager.
func (g *GatewaySpec) UsesCertManager() bool {
	return g.IsEnabled() && g.Certificate != nil && g.Certificate.CertManager != nil
}

// GatewayState is where the default gateway stands.
// +kubebuilder:validation:Enum=Disabled;Ready;Pending;Warning;Error
type GatewayState string

// The default gateway's states.
const (
	// GatewayDisabled: the default gateway is not configured or disabled,
	// and nothing of it is left.
	GatewayDisabled GatewayState = "Disabled"
	// GatewayReady: the Gateway serves *.<domain> with a valid certificate.
	GatewayReady GatewayState = "Ready"
	// GatewayPending: the certificate is being issued (cert-manager).
	GatewayPending GatewayState = "Pending"
	// GatewayWarning: the gateway works but needs attention (disabled while
	// APIRules still use it; a certificate close to expiry).
	GatewayWarning GatewayState = "Warning"
	// GatewayError: the gateway cannot serve: an invalid or missing
	// certificate, an object of the same name Portico did not create.
	GatewayError GatewayState = "Error"
)

// Reasons of the default gateway's state, in GatewayStatus.Reason.
const (
	// ReasonNotConfigured (conditions.go) (Disabled): spec.gateway is not
	// set or disabled.
	// ReasonGatewayReady (Ready): the Gateway and a valid certificate are in place.
	ReasonGatewayReady = "GatewayReady"
	// ReasonGatewayInUse (Warning): the gateway is disabled but APIRules
	// still use it; nothing is removed until they are gone.
	ReasonGatewayInUse = "GatewayInUse"
	// ReasonCertificatePending (Pending): cert-manager has not issued the
	// certificate yet; the message has its Ready condition.
	ReasonCertificatePending = "CertificatePending"
	// ReasonCertificateInvalid (Error): the certificate's Secret is missing,
	// not a matching key pair, not valid for *.<domain>, or expired.
	ReasonCertificateInvalid = "CertificateInvalid"
	// ReasonCertificateExpiring (Warning): a certificate Portico does not
	// renew (secretName) expires within 14 days.
	ReasonCertificateExpiring = "CertificateExpiring"
	// ReasonObjectNotOwned (Error): a Gateway, VirtualService, Secret,
	// ConfigMap or Certificate with the name Portico uses exists and
	// Portico did not create it; it is left alone.
	ReasonObjectNotOwned = "ObjectNotOwned"
	// ReasonNamespaceNotFound (Error): spec.gateway.namespace does not exist
	// (yet); the controller looks again every two minutes.
	ReasonNamespaceNotFound = "NamespaceNotFound"
	// ReasonApplyFailed (Error), the constant of the Ready condition's
	// reason of the same name: the API server refused a write; the message
	// has its error.
	// ReasonClientCAInvalid (Error): spec.gateway.clientCertificates names
	// a CA bundle that is missing, unreadable or holds no valid CA
	// certificate; the gateway keeps the client-certificate settings and
	// CAs it had (none, if it had none) until the bundle is fixed.
	ReasonClientCAInvalid = "ClientCAInvalid"
	// ReasonGatewayNotProgrammed (Pending): spec.gateway.gatewayAPI: the
	// Gateway API Gateway is written, and its controller has not (yet)
	// reported it Programmed for its current generation; the message has
	// what it said.
	ReasonGatewayNotProgrammed = "GatewayNotProgrammed"
)

// Names kept for callers of the former names (a reason constant is named
// after its value).
const (
	// Deprecated: use ReasonNotConfigured.
	ReasonGatewayNotConfigured = ReasonNotConfigured
	// Deprecated: use ReasonApplyFailed.
	ReasonGatewayApplyFailed = ReasonApplyFailed
)

// GatewayStatus is the observed state of the default gateway, written by the
// gateway controller.
type GatewayStatus struct {
	// state of the default gateway: Disabled, Ready, Pending, Warning or Error.
	// +optional
	State GatewayState `json:"state,omitempty"`

	// reason is a CamelCase word explaining the state; the values are
	// documented constants of this API.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty"`

	// message explains the state to a human.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`

	// gateway is the Gateway, as <namespace>/<name>, APIRules that name no
	// gateway use: an Istio Gateway, or a Gateway API Gateway when
	// gatewayAPI is true.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	Gateway string `json:"gateway,omitempty"`

	// gatewayAPI is true when gateway is a Gateway API Gateway
	// (spec.gateway.gatewayAPI).
	// +optional
	GatewayAPI bool `json:"gatewayAPI,omitempty"`

	// hosts the gateway serves.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	Hosts []string `json:"hosts,omitempty"`

	// secretName is the TLS Secret the Gateway serves.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`

	// caConfigMap is the ConfigMap (key ca.crt) with the CA that clients
	// trust, for the selfSigned certificate.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	CAConfigMap string `json:"caConfigMap,omitempty"`

	// clientCertificates is the client-certificate mode the gateway is
	// configured with now: Required, Optional, or empty when it asks for
	// none. It lags spec.gateway.clientCertificates while the CA bundle is
	// invalid (reason ClientCAInvalid).
	// +optional
	ClientCertificates ClientCertificateMode `json:"clientCertificates,omitempty"`

	// notAfter is when the serving certificate expires.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`

	// observedGeneration is the APIGateway generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// DefaultGatewayAPI reports whether the default gateway DefaultGateway
// returns is a Gateway API Gateway (APIRules on it become HTTPRoutes on its
// https listener) rather than an Istio Gateway.
func (gw *APIGateway) DefaultGatewayAPI() bool {
	if gw == nil {
		return false
	}
	if spec := gw.Spec.Gateway; spec.IsEnabled() && spec.Domain != "" {
		return spec.GatewayAPI != nil
	}
	return gw.Status.Gateway != nil && gw.Status.Gateway.GatewayAPI
}

// DefaultGateway returns the Gateway, as <namespace>/<name>, that
// APIRules naming no gateway use, and the domain under which their hosts
// must be; ok is false when there is none. It is the gateway spec.gateway
// enables or, once disabled, the one the gateway controller still keeps
// because APIRules use it (status.gateway), so that those APIRules keep
// working until they move.
func (gw *APIGateway) DefaultGateway() (ref, domain string, ok bool) {
	if gw == nil {
		return "", "", false
	}
	if spec := gw.Spec.Gateway; spec.IsEnabled() && spec.Domain != "" {
		ns := spec.Namespace
		if ns == "" {
			ns = DefaultGatewayNamespace
		}
		return ns + "/" + DefaultGatewayName, spec.Domain, true
	}
	if st := gw.Status.Gateway; st != nil && st.Gateway != "" && len(st.Hosts) > 0 && strings.HasPrefix(st.Hosts[0], "*.") {
		return st.Gateway, strings.TrimPrefix(st.Hosts[0], "*."), true
	}
	return "", "", false
}
