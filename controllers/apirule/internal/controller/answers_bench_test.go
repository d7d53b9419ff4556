package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/internal/quarantine"
	"github.com/portico-dev/portico/internal/owned"
)

// answerBenchVirtualService is a VirtualService as the apirule controller
// writes one for an APIRule of eight rules.
func answerBenchVirtualService() *networkingv1.VirtualService {
	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "team-a",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "apirule-controller", "gateway.portico.dev/apirule": "orders"}}}
	vs.Spec.Hosts = []string{"orders.example.com"}
	vs.Spec.Gateways = []string{"istio-system/public"}
	for i := range 8 {
		vs.Spec.Http = append(vs.Spec.Http, &networkingv1alpha3.HTTPRoute{
			Name: fmt.Sprintf("rule-%d", i),
			Match: []*networkingv1alpha3.HTTPMatchRequest{{
				Uri:    &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Prefix{Prefix: fmt.Sprintf("/api/v1/orders/%d/", i)}},
				Method: &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Regex{Regex: "^(GET|POST|PUT)$"}},
			}},
			Route: []*networkingv1alpha3.HTTPRouteDestination{{Destination: &networkingv1alpha3.Destination{
				Host: "orders.team-a.svc.cluster.local", Port: &networkingv1alpha3.PortSelector{Number: 8080},
			}}},
			Headers: &networkingv1alpha3.Headers{Request: &networkingv1alpha3.Headers_HeaderOperations{
				Set: map[string]string{"x-forwarded-host": "orders.example.com"}, Remove: []string{"x-portico-user"},
			}},
		})
	}
	return vs
}

// answerServer answers every create of a VirtualService as the API server
// does: with the whole object as JSON, or, when the request asks for it,
// with its metadata as protobuf.
func answerServer(b *testing.B, vs *networkingv1.VirtualService) *httptest.Server {
	b.Helper()
	stored := vs.DeepCopy()
	stored.APIVersion, stored.Kind = "networking.istio.io/v1", "VirtualService"
	stored.UID, stored.ResourceVersion, stored.Generation = "5e0a1a8c-7f7e-4a53-9d7b-0c5d7e3c9a11", "1042", 1
	stored.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "networking.istio.io/v1", FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{".":{},"f:app.kubernetes.io/managed-by":{},"f:gateway.portico.dev/apirule":{}}},"f:spec":{".":{},"f:gateways":{},"f:hosts":{},"f:http":{}}}`)}}
	whole, err := json.Marshal(stored)
	if err != nil {
		b.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	partial := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}, ObjectMeta: stored.ObjectMeta}
	var metadataOnly bytes.Buffer
	if err := protobuf.NewSerializer(scheme, scheme).Encode(partial, &metadataOnly); err != nil {
		b.Fatal(err)
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata") {
			w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(metadataOnly.Bytes())
			return
		}
		w.Header().Set("Content-Type", runtime.ContentTypeJSON)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(whole)
	}))
}

// BenchmarkCreateAnswer is one create of a VirtualService of eight rules
// and the decode of its answer, through the quarantine guard as the
// controllers run it: whole (the client's own create: the guard and the
// client each decode the answer's spec) and metadata (owned.MetadataAnswers,
// the apirule controller's writes). Compare the two in the same run.
func BenchmarkCreateAnswer(b *testing.B) {
	vs := answerBenchVirtualService()
	srv := answerServer(b, vs)
	defer srv.Close()
	scheme := runtime.NewScheme()
	for _, add := range schemeKinds {
		if err := add(scheme); err != nil {
			b.Fatal(err)
		}
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(networkingv1.SchemeGroupVersion.WithKind("VirtualService"), meta.RESTScopeNamespace)
	// No client-side rate limit: the figure is the write, not the limiter.
	cfg := &rest.Config{Host: srv.URL, QPS: -1}
	cfg.Wrap(quarantine.New(scheme, quarantine.Options{}).Wrap)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: httpClient})
	if err != nil {
		b.Fatal(err)
	}
	metadataOnly, err := owned.MetadataAnswers(c, cfg, httpClient)
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range []struct {
		name   string
		client client.Client
	}{{"whole", c}, {"metadata", metadataOnly}} {
		b.Run(w.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obj := vs.DeepCopy()
				if err := w.client.Create(context.Background(), obj, client.FieldOwner(FieldManager)); err != nil {
					b.Fatal(err)
				}
				if obj.UID == "" || obj.ResourceVersion != "1042" {
					b.Fatalf("the answer's metadata is missing: %q %q", obj.UID, obj.ResourceVersion)
				}
			}
		})
	}
}

// BenchmarkStatusPatchData is the merge patch of a status write of an
// APIRule of eight rules: computed over the whole APIRule (before) and
// over its identity and status (statusOnly, writeStatus). Compare the two
// in the same run; both patches must be equal.
func BenchmarkStatusPatchData(b *testing.B) {
	before := &porticov1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "team-a", UID: "uid-orders", ResourceVersion: "41",
		Finalizers: []string{Finalizer}}}
	before.Spec.Hosts = []porticov1alpha1.Hostname{"orders.example.com"}
	before.Spec.Service = &porticov1alpha1.ServiceReference{Name: "orders", Port: 8080}
	for i := range 8 {
		before.Spec.Rules = append(before.Spec.Rules, porticov1alpha1.Rule{Path: fmt.Sprintf("/api/v1/orders/%d/*", i),
			Methods: []porticov1alpha1.HTTPMethod{"GET", "POST", "PUT"}, NoAuth: ptr.To(true)})
	}
	after := before.DeepCopy()
	setReady(after, metav1.ConditionTrue, porticov1alpha1.ReasonApplied, "VirtualService team-a/orders applied")
	patches := map[string]func() ([]byte, error){
		"whole": func() ([]byte, error) {
			base := before.DeepCopy()
			return client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}).Data(after)
		},
		"statusOnly": func() ([]byte, error) {
			return client.MergeFromWithOptions(statusOnly(before, after.ResourceVersion), client.MergeFromWithOptimisticLock{}).Data(statusOnly(after, after.ResourceVersion))
		},
	}
	whole, err := patches["whole"]()
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"whole", "statusOnly"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				data, err := patches[name]()
				if err != nil || !bytes.Equal(data, whole) {
					b.Fatalf("%s: %v", data, err)
				}
			}
		})
	}
}
