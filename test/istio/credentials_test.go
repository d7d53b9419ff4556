package istio

import (
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"istio.io/istio/pilot/pkg/model"
	v3 "istio.io/istio/pilot/pkg/xds/v3"
	istioxds "istio.io/istio/pilot/test/xds"
	"istio.io/istio/pilot/test/xdstest"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/gvk"
	"istio.io/istio/pkg/spiffe"
	"istio.io/istio/pkg/util/sets"
	xdsserver "istio.io/istio/pkg/xds"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/e2e/envoy"
)

// TestDefaultGatewayCredentialsResolve: the listeners istiod generates
// for the default gateway Portico writes in Istio mode (without client
// certificates, Required, Optional) name SDS secrets, and istiod's own SDS
// (the SecretResource generator the gateway's istio-agent asks over ADS)
// serves every one of them from what exists in the gateway's namespace:
// the credential Secret and Portico's ConfigMap copy of the administrator's
// client CAs (key ca.crt). The client CAs are exactly that copy's: a
// Secret of the copy's name and a Secret <credential>-cacert, each holding
// another CA (whoever could write them would choose whom the gateway
// trusts), change nothing.
//
// Found in the node e2e with the gateway stand-in programmed by istiod:
// Portico wrote caCertCredentialName: portico-gateway-client-ca, the bare
// name of its ConfigMap; Istio turns a bare name into the SDS secret
// kubernetes://portico-gateway-client-ca, a Secret, so no validation
// context was served and every handshake of the MUTUAL server failed.
func TestDefaultGatewayCredentialsResolve(t *testing.T) {
	for _, variant := range []string{"istio", "istio-mtls", "istio-mtls-optional"} {
		t.Run(variant, func(t *testing.T) { credentialsResolve(t, variant) })
	}
}

func credentialsResolve(t *testing.T, variant string) {
	gw := typed[networkingv1.Gateway](t, controllerObjects(t)["default-gateway."+variant+".gateway.object.yaml"])
	ns := gw.Namespace
	var credential string
	for _, s := range gw.Spec.GetServers() {
		if s.GetTls().GetCredentialName() != "" {
			credential = s.GetTls().GetCredentialName()
		}
	}
	if credential == "" {
		t.Fatalf("the default gateway %s has no HTTPS server with a credential", variant)
	}
	admin := selfSigned(t, "clients.example")[corev1.TLSCertKey]
	intruder := selfSigned(t, "intruder.example")[corev1.TLSCertKey]
	serving := selfSigned(t, "*.example.com")
	s := istioxds.NewFakeDiscoveryServer(t, istioxds.FakeOptions{
		Configs: []config.Config{{Meta: config.Meta{GroupVersionKind: gvk.Gateway, Namespace: ns, Name: gw.Name}, Spec: &gw.Spec}},
		KubernetesObjects: []runtime.Object{
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: credential}, Type: corev1.SecretTypeTLS, Data: serving},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: operatorv1alpha1.DefaultGatewayClientCAConfigMap},
				Data: map[string]string{"ca.crt": string(admin)}},
			// The attacks: Secrets a gateway could read its client CAs from.
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: operatorv1alpha1.DefaultGatewayClientCAConfigMap},
				Data: map[string][]byte{"cacert": intruder, "ca.crt": intruder}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: credential + "-cacert"}, Data: map[string][]byte{"cacert": intruder}},
		},
		// The gateway's ServiceAccount may read Secrets of its namespace,
		// as Istio's gateway chart grants.
		DisableSecretAuthorization: true,
	})
	labels := gw.Spec.GetSelector()
	proxy := s.SetupProxy(&model.Proxy{Type: model.Router, Labels: labels, ConfigNamespace: ns,
		Metadata:         &model.NodeMetadata{Namespace: ns, Labels: labels, ClusterID: "Kubernetes"},
		VerifiedIdentity: &spiffe.Identity{TrustDomain: "cluster.local", Namespace: ns, ServiceAccount: "istio-ingressgateway"}})

	var names, cas []string
	required := false
	for _, l := range s.Listeners(proxy) {
		for _, fc := range append(slices.Clone(l.GetFilterChains()), l.GetDefaultFilterChain()) {
			names, cas, required = sdsNames(fc, names, cas, required)
		}
	}
	if len(names) == 0 {
		t.Fatalf("istiod's listeners for %s name no SDS secret", variant)
	}
	mutual := variant != "istio"
	if got := len(cas) > 0; got != mutual || required != (variant == "istio-mtls") {
		t.Fatalf("%s: client CAs %v, client certificate required %v", variant, cas, required)
	}

	gen := s.Discovery.Generators[v3.SecretType]
	res, _, err := gen.Generate(proxy, &model.WatchedResource{ResourceNames: sets.New(names...)}, &model.PushRequest{Forced: true})
	if err != nil {
		t.Fatal(err)
	}
	secrets := xdstest.ExtractTLSSecrets(t, xdsserver.ResourcesToAny(res))
	for _, name := range names {
		sec, ok := secrets[name]
		switch {
		case !ok:
			t.Errorf("%s: istiod's SDS serves no secret %q (the Gateway's tls: %v); served: %v", variant, name, gw.Spec.GetServers()[0].GetTls(), keys(secrets))
		case slices.Contains(cas, name):
			if got := string(sec.GetValidationContext().GetTrustedCa().GetInlineBytes()); got != string(admin) {
				t.Errorf("%s: the client CAs of %q are not the administrator's bundle: %q", variant, name, got)
			}
		default:
			if got := string(sec.GetTlsCertificate().GetCertificateChain().GetInlineBytes()); got != string(serving[corev1.TLSCertKey]) {
				t.Errorf("%s: the certificate of %q is not the credential's: %q", variant, name, got)
			}
		}
	}
}

// sdsNames adds the SDS names of a chain's downstream TLS context: every
// one to names, the client CAs' to cas too.
func sdsNames(fc *listenerv3.FilterChain, names, cas []string, required bool) ([]string, []string, bool) {
	tc := envoy.DownstreamTLS(fc)
	if tc == nil {
		return names, cas, required
	}
	for _, c := range tc.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs() {
		names = append(names, c.GetName())
	}
	if v := tc.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig(); v != nil {
		names, cas = append(names, v.GetName()), append(cas, v.GetName())
	}
	if v := tc.GetCommonTlsContext().GetValidationContextSdsSecretConfig(); v != nil {
		names, cas = append(names, v.GetName()), append(cas, v.GetName())
	}
	return names, cas, required || tc.GetRequireClientCertificate().GetValue()
}
