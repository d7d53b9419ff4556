package controller

import (
	"slices"
	"strings"
	"testing"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

func TestEndpointSliceKeyIsItsService(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   []string
	}{
		{name: "a Service's slice", labels: map[string]string{discoveryv1.LabelServiceName: "web"}, want: []string{"shop/web"}},
		{name: "a slice of no Service", labels: map[string]string{"app": "web"}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-abc", Labels: tt.labels}}
			if got := endpointSliceKey(s); !slices.Equal(got, tt.want) {
				t.Errorf("endpointSliceKey = %q, want %q", got, tt.want)
			}
		})
	}
}

// serviceEntryWorld is every pair of Service and ServiceEntry host the
// alias check must see: each name form, wildcards over each, other
// namespaces, upper case, and hosts that only look alike.
var (
	entryHosts = []string{
		"web.shop.svc.cluster.local", "web.shop.svc", "web.shop", "WEB.Shop.svc.cluster.local",
		"*.shop.svc.cluster.local", "*.svc.cluster.local", "*.cluster.local", "*.local", "*.shop.svc", "*.shop", "*.svc",
		"api.shop.svc.cluster.local", "web.other.svc.cluster.local", "web.shop.svc.cluster.local.evil", "x.web.shop",
		"shop.svc", "svc.cluster.local", "web.svc", "*", "example.com", "*.example.com",
	}
	entryNamespaces = []string{"shop", "other"}
	services        = []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "web"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "svc", Name: "web"}},
	}
)

// The ServiceEntry host index must find every ServiceEntry that declares a
// name of a Service: a missed one would let a tenant's ServiceEntry alias
// another's backend unseen.
func TestServiceEntryHostIndexFindsEveryDeclaration(t *testing.T) {
	found := 0
	for _, ns := range entryNamespaces {
		for _, h := range entryHosts {
			se := &networkingv1.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "se"}, Spec: networkingv1alpha3.ServiceEntry{Hosts: []string{h}}}
			for _, svc := range services {
				if declaredHost(se, svc) == "" {
					continue
				}
				found++
				lookup := serviceEntryLookupKeys(svc)
				if !slices.ContainsFunc(serviceEntryHostKeys(se), func(k string) bool { return slices.Contains(lookup, k) }) {
					t.Errorf("ServiceEntry %s/%s declares a name of Service %s/%s, but the index does not find it (keys %q, lookup %q)",
						ns, h, svc.Namespace, svc.Name, serviceEntryHostKeys(se), lookup)
				}
			}
		}
	}
	if found < 10 {
		t.Fatalf("only %d declarations in the world: the test checks too little", found)
	}
}

// A ServiceEntry's event must reach the APIRules of every Service it may
// declare a name of, and only of those Services or its own namespace's.
func TestServiceEntryTargetsCoverEveryDeclaration(t *testing.T) {
	for _, ns := range entryNamespaces {
		for _, h := range entryHosts {
			se := &networkingv1.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "se"}, Spec: networkingv1alpha3.ServiceEntry{Hosts: []string{h}}}
			targets, namespace := serviceEntryTargets(se)
			if namespace != "" && namespace != ns {
				t.Errorf("ServiceEntry %s/%s targets namespace %s, not its own", ns, h, namespace)
			}
			for _, svc := range services {
				if declaredHost(se, svc) == "" {
					continue
				}
				if !slices.Contains(targets, svc.Namespace+"/"+svc.Name) && namespace != svc.Namespace {
					t.Errorf("ServiceEntry %s/%s declares a name of Service %s/%s, but its event reaches %q and namespace %q",
						ns, h, svc.Namespace, svc.Name, targets, namespace)
				}
			}
		}
	}
	tests := []struct {
		name, host    string
		wantServices  []string
		wantNamespace string
	}{
		{name: "a Service's full name", host: "web.shop.svc.cluster.local", wantServices: []string{"shop/web"}},
		{name: "its short name", host: "web.shop.svc", wantServices: []string{"shop/web"}},
		{name: "a wildcard", host: "*.shop.svc.cluster.local", wantNamespace: "team"},
		{name: "another name", host: "example.com", wantServices: []string{"com/example"}},
		{name: "a single label", host: "web", wantServices: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			se := &networkingv1.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "se"}, Spec: networkingv1alpha3.ServiceEntry{Hosts: []string{tt.host}}}
			services, namespace := serviceEntryTargets(se)
			if !slices.Equal(services, tt.wantServices) || namespace != tt.wantNamespace {
				t.Errorf("serviceEntryTargets = %q, %q; want %q, %q", services, namespace, tt.wantServices, tt.wantNamespace)
			}
		})
	}
}

// A route without hostnames is keyed by each Gateway it attaches to: the
// HostShared check of an APIRule on that Gateway finds it, and that of an
// APIRule on another Gateway does not read it.
func TestRouteHostKeysOfARouteWithoutHostnames(t *testing.T) {
	ref := func(ns *string, name string, group, kind *string) gwapiv1.ParentReference {
		r := gwapiv1.ParentReference{Name: gwapiv1.ObjectName(name)}
		if ns != nil {
			r.Namespace = ptr.To(gwapiv1.Namespace(*ns))
		}
		if group != nil {
			r.Group = ptr.To(gwapiv1.Group(*group))
		}
		if kind != nil {
			r.Kind = ptr.To(gwapiv1.Kind(*kind))
		}
		return r
	}
	tests := []struct {
		name string
		refs []gwapiv1.ParentReference
		want []string
	}{
		{name: "a Gateway of its namespace", refs: []gwapiv1.ParentReference{ref(nil, "gw", nil, nil)}, want: []string{"any:shop/gw"}},
		{name: "a Gateway of another namespace, by group and kind",
			refs: []gwapiv1.ParentReference{ref(ptr.To("infra"), "gw", ptr.To(porticov1alpha1.GatewayAPIGroup), ptr.To("Gateway"))}, want: []string{"any:infra/gw"}},
		{name: "two Gateways", refs: []gwapiv1.ParentReference{ref(nil, "a", nil, nil), ref(ptr.To("infra"), "b", nil, nil)},
			want: []string{"any:shop/a", "any:infra/b"}},
		{name: "a parent that is no Gateway", refs: []gwapiv1.ParentReference{ref(nil, "svc", ptr.To(""), ptr.To("Service"))}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			route := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r"}}
			route.Spec.ParentRefs = tt.refs
			got := routeHostKeys(route)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("routeHostKeys = %q, want %q", got, tt.want)
			}
			for _, r := range tt.refs {
				ns := "shop"
				if r.Namespace != nil {
					ns = string(*r.Namespace)
				}
				parent := &porticov1alpha1.ParentReference{Namespace: ns, Name: string(r.Name)}
				if onParent(route, parent) != slices.Contains(got, anyHostKey(ns, string(r.Name))) {
					t.Errorf("route on %s/%s: onParent = %v, but its keys %q say otherwise", ns, r.Name, onParent(route, parent), got)
				}
			}
		})
	}
}

func TestRouteHostKeysOfHostnames(t *testing.T) {
	route := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r"}}
	route.Spec.Hostnames = []gwapiv1.Hostname{"API.example.com"}
	if got, want := routeHostKeys(route), []string{"h:api.example.com", "u:example.com", "u:com"}; !slices.Equal(got, want) {
		t.Errorf("routeHostKeys = %q, want %q", got, want)
	}
}

// The cached Service keeps every field the backend checks read (aliasOf,
// permits, the selectors of checkAccess) and drops the rest.
func TestStripServiceKeepsWhatTheChecksRead(t *testing.T) {
	full := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", ResourceVersion: "7", UID: "u", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{
				porticov1alpha1.AnnotationAllowedAPIRuleNamespaces: "team-b",
				corev1.LastAppliedConfigAnnotation:                 strings.Repeat("x", 4096),
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com", Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}, ClusterIP: "10.0.0.1"},
	}
	got, err := stripService(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	svc := got.(*corev1.Service)
	if aliasOfSpec(svc) != aliasOfSpec(full) || !permits(svc, "team-b") || permits(svc, "team-c") ||
		svc.Name != "web" || svc.Namespace != "shop" || svc.ResourceVersion != "7" || svc.UID != "u" || svc.Spec.Selector["app"] != "web" {
		t.Errorf("stripService lost what the checks read: %+v", svc)
	}
	if len(svc.Annotations) != 1 || svc.ManagedFields != nil || svc.Spec.Ports != nil || svc.Spec.ClusterIP != "" || svc.Labels != nil {
		t.Errorf("stripService kept what nothing reads: %+v", svc)
	}
	other := &networkingv1.ServiceEntry{}
	if kept, _ := stripService(other); kept != other {
		t.Errorf("stripService changed an object that is no Service")
	}
}

func aliasOfSpec(svc *corev1.Service) string {
	return string(svc.Spec.Type) + "/" + svc.Spec.ExternalName
}

// The cached EndpointSlice gives the alias check the verdict the whole
// slice gives, whatever its endpoints, and keeps no endpoint of a slice of
// its namespace's pods.
func TestStripEndpointSliceKeepsTheVerdict(t *testing.T) {
	pod := func(ns string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, TargetRef: &corev1.ObjectReference{
			Kind: "Pod", Namespace: ns, Name: "web-1", UID: "u", ResourceVersion: "3"}}
	}
	node := discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	noTarget := discoveryv1.Endpoint{Addresses: []string{"192.0.2.1"}}
	tests := map[string]struct {
		endpoints []discoveryv1.Endpoint
		refused   bool
		kept      int
	}{
		"pods of its namespace":             {[]discoveryv1.Endpoint{pod("shop"), pod("shop"), pod("")}, false, 0},
		"no endpoint":                       {nil, false, 0},
		"a pod of another namespace":        {[]discoveryv1.Endpoint{pod("shop"), pod("team-b")}, true, 1},
		"another kind":                      {[]discoveryv1.Endpoint{node, pod("shop")}, true, 1},
		"no target (an address anyone set)": {[]discoveryv1.Endpoint{pod("shop"), noTarget}, true, 1},
		"every kind of refusal":             {[]discoveryv1.Endpoint{noTarget, node, pod("team-b"), pod("shop")}, true, 3},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			full := &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-abcde", ResourceVersion: "9", UID: "s",
					Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
				Endpoints: tt.endpoints,
			}
			got, err := stripEndpointSlice(full.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			slice := got.(*discoveryv1.EndpointSlice)
			name, refused := sliceNotOfPods([]discoveryv1.EndpointSlice{*slice}, "shop")
			wantName, wantRefused := sliceNotOfPods([]discoveryv1.EndpointSlice{*full}, "shop")
			if refused != wantRefused || name != wantName || refused != tt.refused {
				t.Errorf("verdict on the cached slice %q %v, on the whole slice %q %v, want refused=%v", name, refused, wantName, wantRefused, tt.refused)
			}
			if len(slice.Endpoints) != tt.kept {
				t.Errorf("kept %d endpoints, want %d: %+v", len(slice.Endpoints), tt.kept, slice.Endpoints)
			}
			if got := endpointSliceKey(slice); !slices.Equal(got, []string{"shop/web"}) {
				t.Errorf("index key of the cached slice %q, want [shop/web]", got)
			}
			if len(slice.Labels) != 1 || slice.UID != "s" || slice.ResourceVersion != "9" || slice.Name != "web-abcde" {
				t.Errorf("cached slice's metadata: %+v", slice.ObjectMeta)
			}
			for _, ep := range slice.Endpoints {
				if ep.TargetRef != nil && (ep.TargetRef.Name != "" || ep.TargetRef.UID != "") || ep.Addresses != nil {
					t.Errorf("kept more of an endpoint than its target's kind and namespace: %+v", ep)
				}
			}
		})
	}
}
