package istio

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	"istio.io/istio/pilot/pkg/config/kube/gateway"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/networking/core"
	"istio.io/istio/pilot/pkg/serviceregistry/kube/controller"
	"istio.io/istio/pilot/pkg/status"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/collection"
	"istio.io/istio/pkg/config/schema/collections"
	"istio.io/istio/pkg/config/schema/gvk"
	"istio.io/istio/pkg/config/schema/gvr"
	"istio.io/istio/pkg/kube"
	"istio.io/istio/pkg/kube/kclient/clienttest"
	"istio.io/istio/pkg/kube/krt"
	"istio.io/istio/pkg/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/gateway-api/pkg/consts"
)

// The Gateway API parent every HTTPRoute of the golden files and the
// corpus attaches to, shaped as the gateway controller writes the default
// Gateway API Gateway (controllers/gateway/internal/controller
// DesiredGatewayAPIGateway): an HTTPS listener "https" for *.example.com
// admitting routes of every namespace, an HTTP one for its own namespace.
const (
	parentNamespace = "infra"
	parentName      = "public"
	gatewayClass    = "istio"
	istioController = "istio.io/gateway-controller"
)

func parentObjects(t *testing.T) []runtime.Object {
	t.Helper()
	host := gwapiv1.Hostname("*.example.com")
	return []runtime.Object{
		&gwapiv1.GatewayClass{
			ObjectMeta: metav1.ObjectMeta{Name: gatewayClass, Generation: 1},
			Spec:       gwapiv1.GatewayClassSpec{ControllerName: istioController},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: parentNamespace, Name: "public-tls"},
			Type:       corev1.SecretTypeTLS,
			Data:       selfSigned(t, "*.example.com"),
		},
		&gwapiv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: parentNamespace, Name: parentName, Generation: 1},
			Spec: gwapiv1.GatewaySpec{
				GatewayClassName: gatewayClass,
				Listeners: []gwapiv1.Listener{{
					Name: "https", Hostname: &host, Port: 443, Protocol: gwapiv1.HTTPSProtocolType,
					TLS: &gwapiv1.ListenerTLSConfig{Mode: ptr.To(gwapiv1.TLSModeTerminate), CertificateRefs: []gwapiv1.SecretObjectReference{{
						Group: ptr.To(gwapiv1.Group("")), Kind: ptr.To(gwapiv1.Kind("Secret")), Name: "public-tls",
					}}},
					AllowedRoutes: &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: ptr.To(gwapiv1.NamespacesFromAll)}},
				}, {
					Name: "http", Hostname: &host, Port: 80, Protocol: gwapiv1.HTTPProtocolType,
					AllowedRoutes: &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: ptr.To(gwapiv1.NamespacesFromSame)}},
				}},
			},
		},
	}
}

// selfSigned is a TLS Secret's data: a fresh self-signed certificate.
func selfSigned(t *testing.T, host string) map[string][]byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}

// backendObjects are the Services the routes name (every port they name)
// and, for each namespace other than a route's own that a route sends
// requests to, a ReferenceGrant of that namespace admitting HTTPRoutes of
// the route's namespace: the consent Portico requires in HTTPRoute mode.
func backendObjects(routes []*gwapiv1.HTTPRoute) []runtime.Object {
	ports := map[[2]string]map[int32]bool{}
	grants := map[[2]string]bool{}
	for _, r := range routes {
		for _, rule := range r.Spec.Rules {
			for _, ref := range rule.BackendRefs {
				ns := r.Namespace
				if ref.Namespace != nil {
					ns = string(*ref.Namespace)
				}
				key := [2]string{ns, string(ref.Name)}
				if ports[key] == nil {
					ports[key] = map[int32]bool{}
				}
				ports[key][*ref.Port] = true
				if ns != r.Namespace {
					grants[[2]string{ns, r.Namespace}] = true
				}
			}
		}
	}
	var out []runtime.Object
	for key, set := range ports {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key[0], Name: key[1]},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Selector: map[string]string{"app": key[1]}}}
		for p := range set {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("http-%d", p), Port: p, Protocol: corev1.ProtocolTCP})
		}
		sort.Slice(svc.Spec.Ports, func(i, j int) bool { return svc.Spec.Ports[i].Port < svc.Spec.Ports[j].Port })
		out = append(out, svc)
	}
	for g := range grants {
		out = append(out, &gwapiv1beta1.ReferenceGrant{
			ObjectMeta: metav1.ObjectMeta{Namespace: g[0], Name: "from-" + g[1]},
			Spec: gwapiv1beta1.ReferenceGrantSpec{
				From: []gwapiv1beta1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "HTTPRoute", Namespace: gwapiv1.Namespace(g[1])}},
				To:   []gwapiv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
			},
		})
	}
	return out
}

// statusStore is the store istiod's status manager writes Gateway API
// statuses into: it records them instead of writing to an API server.
type statusStore struct {
	mu       sync.Mutex
	statuses map[string]any // by <kind>/<namespace>/<name>
}

var _ model.ConfigStore = &statusStore{}

func (s *statusStore) Schemas() collection.Schemas { return collections.PilotGatewayAPI() }

// Get returns an object of generation 1 with an empty status, so the
// status manager's generation check passes and its writers fill it in.
func (s *statusStore) Get(typ config.GroupVersionKind, name, namespace string) *config.Config {
	return &config.Config{Meta: config.Meta{GroupVersionKind: typ, Name: name, Namespace: namespace, Generation: 1}}
}

func (s *statusStore) List(config.GroupVersionKind, string) []config.Config { return nil }

func (s *statusStore) Create(config.Config) (string, error) {
	return "", fmt.Errorf("the status store takes statuses only")
}

func (s *statusStore) Update(config.Config) (string, error) {
	return "", fmt.Errorf("the status store takes statuses only")
}

func (s *statusStore) UpdateStatus(c config.Config) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses[c.GroupVersionKind.Kind+"/"+c.Namespace+"/"+c.Name] = c.Status
	return "1", nil
}

func (s *statusStore) Delete(config.GroupVersionKind, string, string, *string) error {
	return fmt.Errorf("the status store takes statuses only")
}

func (s *statusStore) status(kind, namespace, name string) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statuses[kind+"/"+namespace+"/"+name]
}

// gatewayAPI is istiod's Gateway API controller over a fake cluster, with
// its status writes going to a statusStore.
type gatewayAPI struct {
	controller *gateway.Controller
	statuses   *statusStore
}

func newGatewayAPI(t *testing.T, objs ...runtime.Object) gatewayAPI {
	t.Helper()
	kc := kube.NewFakeClient(objs...)
	for _, crd := range []schema.GroupVersionResource{gvr.KubernetesGateway, gvr.ReferenceGrant, gvr.ListenerSet, gvr.GatewayClass,
		gvr.HTTPRoute, gvr.GRPCRoute, gvr.TCPRoute, gvr.TLSRoute, gvr.ServiceEntry, gvr.XBackendTrafficPolicy, gvr.BackendTLSPolicy, gvr.InferencePool} {
		clienttest.MakeCRDWithAnnotations(t, kc, crd, map[string]string{consts.BundleVersionAnnotation: consts.BundleVersion})
	}
	stop := test.NewStop(t)
	c := gateway.NewController(kc, func(schema.GroupVersionResource, <-chan struct{}) bool { return true },
		controller.Options{KrtDebugger: krt.GlobalDebugHandler, DomainSuffix: "cluster.local"}, nil)
	store := &statusStore{statuses: map[string]any{}}
	manager := status.NewManager(store)
	c.SetStatusWrite(true, manager)
	go manager.Start(stop)
	kc.RunAndWait(stop)
	go c.Run(stop)
	cg := core.NewConfigGenTest(t, core.TestOptions{})
	c.Reconcile(cg.PushContext())
	kube.WaitForCacheSync("gateway-api", stop, c.HasSynced)
	return gatewayAPI{controller: c, statuses: store}
}

// routeStatus waits for the status istiod writes for an HTTPRoute.
func (g gatewayAPI) routeStatus(namespace, name string) (*gwapiv1.HTTPRouteStatus, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s, ok := g.statuses.status(gvk.HTTPRoute.Kind, namespace, name).(*gwapiv1.HTTPRouteStatus); ok && s != nil && len(s.Parents) > 0 {
			return s, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("istiod wrote no status for HTTPRoute %s/%s within 30s (got %#v)", namespace, name, g.statuses.status(gvk.HTTPRoute.Kind, namespace, name))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkAccepted fails unless the status's one parent is the expected
// Gateway, answered by Istio's controller, with Accepted and ResolvedRefs
// true.
func checkAccepted(s *gwapiv1.HTTPRouteStatus) error {
	return checkAcceptedBy(s, "", parentNamespace, parentName)
}

// checkAcceptedBy is checkAccepted for the parent namespace/name of a
// route of routeNamespace (a parentRef without namespace is the route's).
func checkAcceptedBy(s *gwapiv1.HTTPRouteStatus, routeNamespace, namespace, name string) error {
	if len(s.Parents) != 1 {
		return fmt.Errorf("want one parent status, got %d", len(s.Parents))
	}
	p := s.Parents[0]
	ns := routeNamespace
	if p.ParentRef.Namespace != nil {
		ns = string(*p.ParentRef.Namespace)
	}
	if p.ControllerName != istioController || string(p.ParentRef.Name) != name || ns != namespace {
		return fmt.Errorf("parent status of %s for %v", p.ControllerName, p.ParentRef)
	}
	var problems []string
	for _, want := range []string{string(gwapiv1.RouteConditionAccepted), string(gwapiv1.RouteConditionResolvedRefs)} {
		c := findCondition(p.Conditions, want)
		switch {
		case c == nil:
			problems = append(problems, want+" missing")
		case c.Status != metav1.ConditionTrue:
			problems = append(problems, fmt.Sprintf("%s %s (%s: %s)", want, c.Status, c.Reason, c.Message))
		}
	}
	if problems != nil {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// httpRoutes are the HTTPRoutes of the HTTPRoute-mode translations, each
// renamed after its file (the golden files all name theirs orders) so that
// they can live in one cluster; the names of their rules stay Portico's.
func httpRoutes(t *testing.T, trs []translation) map[string]*gwapiv1.HTTPRoute {
	t.Helper()
	out := map[string]*gwapiv1.HTTPRoute{}
	for _, tr := range trs {
		if tr.HTTPRoute == nil {
			continue
		}
		r := tr.HTTPRoute.DeepCopy()
		r.Name = routeObjectName(tr.Name)
		r.Generation = 1
		out[tr.Name] = r
	}
	return out
}

// routeObjectName is a DNS label for a translation's file.
func routeObjectName(file string) string {
	name := strings.TrimSuffix(file, ".golden.yaml")
	return strings.NewReplacer("/", "-", ".", "-").Replace(name)
}

// TestGatewayAPIAcceptsEveryHTTPRoute attaches every HTTPRoute of the
// golden files and the corpus to a Gateway of GatewayClass istio and runs
// istiod's Gateway API controller: each must be Accepted with its
// references resolved, and each of its rules must become a route of the
// converted VirtualService under the rule's own name (the Envoy route name
// per-route rate limits select).
func TestGatewayAPIAcceptsEveryHTTPRoute(t *testing.T) {
	trs := translations(t)
	checkCoverage(t, trs)
	routes := httpRoutes(t, trs)
	objs := parentObjects(t)
	list := make([]*gwapiv1.HTTPRoute, 0, len(routes))
	for _, r := range routes {
		list = append(list, r)
		objs = append(objs, r)
	}
	objs = append(objs, backendObjects(list)...)
	// The control: a route to a Service that does not exist, which Istio
	// must not call resolved, so that the check is seen to fail.
	control := list[0].DeepCopy()
	control.Name = "control-missing-backend"
	control.Spec.Rules = control.Spec.Rules[:1]
	control.Spec.Rules[0].BackendRefs = control.Spec.Rules[0].BackendRefs[:1]
	control.Spec.Rules[0].BackendRefs[0].Name = "missing"
	control.Spec.Rules[0].BackendRefs[0].Namespace = nil
	objs = append(objs, control)
	g := newGatewayAPI(t, objs...)
	if s, err := g.routeStatus(control.Namespace, control.Name); err != nil || checkAccepted(s) == nil {
		t.Fatalf("the control route to a missing Service is accepted with its references resolved (%v)", err)
	}

	converted := map[string]bool{}
	for _, vs := range g.controller.List(gvk.VirtualService, "") {
		for _, h := range vs.Spec.(*networking.VirtualService).GetHttp() {
			converted[h.GetName()] = true
		}
	}
	names := make([]string, 0, len(routes))
	for name := range routes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := routes[name]
		s, err := g.routeStatus(r.Namespace, r.Name)
		if err == nil {
			err = checkAccepted(s)
		}
		if err != nil {
			t.Errorf("%s: HTTPRoute %s/%s: %v", name, r.Namespace, r.Name, err)
		}
		for _, rule := range r.Spec.Rules {
			if rule.Name == nil || !converted[string(*rule.Name)] {
				t.Errorf("%s: HTTPRoute %s/%s: rule %v is no route of Istio's conversion under its own name", name, r.Namespace, r.Name, rule.Name)
			}
		}
	}
	t.Logf("istiod accepted %d HTTPRoutes", len(routes))
}

// gatewayStatus waits for the status istiod writes for a Gateway.
func (g gatewayAPI) gatewayStatus(namespace, name string) (*gwapiv1.GatewayStatus, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s, ok := g.statuses.status(gvk.KubernetesGateway.Kind, namespace, name).(*gwapiv1.GatewayStatus); ok && s != nil && len(s.Conditions) > 0 {
			return s, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("istiod wrote no status for Gateway %s/%s within 30s", namespace, name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// typed converts a corpus object into its Gateway API type.
func typed[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// TestGatewayAPIAcceptsTheDefaultGateway runs istiod's Gateway API
// controller over the default gateway the gateway controller writes in
// Gateway API mode (GatewayClass istio, its TLS Secret present): the
// Gateway is Accepted with every listener's references resolved, and its
// redirect HTTPRoute is Accepted on the HTTP listener. With client
// certificates (Required, Optional) the frontend validation's ConfigMap
// portico-gateway-client-ca is present too and resolves.
func TestGatewayAPIAcceptsTheDefaultGateway(t *testing.T) {
	for _, variant := range []string{"gatewayapi", "gatewayapi-mtls", "gatewayapi-mtls-optional"} {
		t.Run(variant, func(t *testing.T) { acceptsTheDefaultGateway(t, variant) })
	}
}

func acceptsTheDefaultGateway(t *testing.T, variant string) {
	objs := controllerObjects(t)
	gw := typed[gwapiv1.Gateway](t, objs["default-gateway."+variant+".gateway.object.yaml"])
	redirect := typed[gwapiv1.HTTPRoute](t, objs["default-gateway.gatewayapi.redirect-httproute.object.yaml"])
	gw.Generation, redirect.Generation = 1, 1
	credential := string(gw.Spec.Listeners[0].TLS.CertificateRefs[0].Name)
	inputs := []runtime.Object{
		&gwapiv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: string(gw.Spec.GatewayClassName), Generation: 1},
			Spec: gwapiv1.GatewayClassSpec{ControllerName: istioController}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: gw.Namespace, Name: credential}, Type: corev1.SecretTypeTLS, Data: selfSigned(t, "*.example.com")},
		gw, redirect,
	}
	if tls := gw.Spec.TLS; tls != nil && tls.Frontend != nil {
		if variant == "gatewayapi" {
			t.Fatalf("the Gateway without client certificates has a frontend validation: %+v", tls.Frontend)
		}
		for _, ref := range tls.Frontend.Default.Validation.CACertificateRefs {
			inputs = append(inputs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: gw.Namespace, Name: string(ref.Name)},
				Data: map[string]string{"ca.crt": string(selfSigned(t, "clients.example")[corev1.TLSCertKey])}})
		}
	} else if variant != "gatewayapi" {
		t.Fatalf("the Gateway of %s has no frontend validation", variant)
	}
	g := newGatewayAPI(t, inputs...)
	s, err := g.gatewayStatus(gw.Namespace, gw.Name)
	if err != nil {
		t.Fatal(err)
	}
	if c := findCondition(s.Conditions, string(gwapiv1.GatewayConditionAccepted)); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Gateway %s/%s is not Accepted: %+v", gw.Namespace, gw.Name, s.Conditions)
	}
	for _, l := range s.Listeners {
		if c := findCondition(l.Conditions, string(gwapiv1.ListenerConditionResolvedRefs)); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("Gateway %s/%s listener %s has unresolved references: %+v", gw.Namespace, gw.Name, l.Name, l.Conditions)
		}
	}
	if len(s.Listeners) != len(gw.Spec.Listeners) {
		t.Errorf("Gateway %s/%s: status of %d listeners, want %d", gw.Namespace, gw.Name, len(s.Listeners), len(gw.Spec.Listeners))
	}
	rs, err := g.routeStatus(redirect.Namespace, redirect.Name)
	if err == nil {
		err = checkAcceptedBy(rs, redirect.Namespace, gw.Namespace, gw.Name)
	}
	if err != nil {
		t.Errorf("HTTPRoute %s/%s: %v", redirect.Namespace, redirect.Name, err)
	}
}
