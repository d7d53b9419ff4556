package istiocorpus

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	gatewaycontroller "github.com/portico-dev/portico/controllers/gateway/internal/controller"
)

// corpusOut is where TestIstioObjects writes the objects test/istio judges
// with Istio's code (that module cannot import this internal package).
var corpusOut = flag.String("corpus-out", "", "write the default gateway's objects, both modes, into this directory for test/istio")

// istioObjects are the objects the controller writes for the default
// gateway in each mode, named <mode>.<kind>.object.yaml.
func istioObjects() map[string]client.Object {
	gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-default"}}
	istio := gatewaycontroller.ConfigFor(&operatorv1alpha1.GatewaySpec{Domain: "example.com"})
	gatewayAPI := gatewaycontroller.ConfigFor(&operatorv1alpha1.GatewaySpec{Domain: "example.com", GatewayAPI: &operatorv1alpha1.DefaultGatewayAPI{}})
	selected := gatewaycontroller.ConfigFor(&operatorv1alpha1.GatewaySpec{Domain: "example.com", GatewayAPI: &operatorv1alpha1.DefaultGatewayAPI{
		RouteNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"portico.dev/tenant": "true"}}}})
	vsGateway, health := gatewaycontroller.DesiredGateway(gw, istio, istio.SecretName, ""), gatewaycontroller.DesiredHealth(gw, istio)
	health.APIVersion, health.Kind = "networking.istio.io/v1", "VirtualService"
	objects := map[string]client.Object{
		"istio.gateway":                 withIstioKind(vsGateway),
		"istio.health-virtualservice":   health,
		"gatewayapi.gateway":            gatewaycontroller.DesiredGatewayAPIGateway(gw, gatewayAPI, gatewayAPI.SecretName, ""),
		"gatewayapi.redirect-httproute": gatewaycontroller.DesiredRedirectRoute(gw, gatewayAPI),
		"gatewayapi-selected.gateway":   gatewaycontroller.DesiredGatewayAPIGateway(gw, selected, selected.SecretName, ""),
	}
	// Client certificates (spec.gateway.clientCertificates), both modes.
	for name, mode := range map[string]operatorv1alpha1.ClientCertificateMode{
		"mtls": operatorv1alpha1.ClientCertificateRequired, "mtls-optional": operatorv1alpha1.ClientCertificateOptional,
	} {
		objects["istio-"+name+".gateway"] = withIstioKind(gatewaycontroller.DesiredGateway(gw, istio, istio.SecretName, mode))
		objects["gatewayapi-"+name+".gateway"] = gatewaycontroller.DesiredGatewayAPIGateway(gw, gatewayAPI, gatewayAPI.SecretName, mode)
	}
	return objects
}

func withIstioKind(g *networkingv1.Gateway) *networkingv1.Gateway {
	g.APIVersion, g.Kind = "networking.istio.io/v1", "Gateway"
	return g
}

// TestIstioObjects writes, with -corpus-out, what the controller writes
// for the default gateway in both modes; without it, it checks that every
// object says its kind (the webhook and test/istio read it).
func TestIstioObjects(t *testing.T) {
	for name, obj := range istioObjects() {
		if obj.GetObjectKind().GroupVersionKind().Kind == "" {
			t.Fatalf("%s has no kind", name)
		}
		if *corpusOut == "" {
			continue
		}
		raw, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(*corpusOut, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*corpusOut, "default-gateway."+name+".object.yaml"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
