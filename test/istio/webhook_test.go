package istio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"istio.io/istio/pkg/config/schema/collections"
	"istio.io/istio/pkg/webhooks/validation/server"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// object is a Kubernetes object Portico writes.
type object interface {
	metav1.Object
	runtime.Object
}

// webhook is istiod's validating webhook, as istiod serves it
// (pilot/pkg/bootstrap/validation.go): its schemas, its domain suffix.
type webhook struct{ mux *http.ServeMux }

func newWebhook(t *testing.T) webhook {
	t.Helper()
	mux := http.NewServeMux()
	if _, err := server.New(server.Options{Schemas: collections.PilotGatewayAPI(), DomainSuffix: "cluster.local", Mux: mux}); err != nil {
		t.Fatal(err)
	}
	return webhook{mux: mux}
}

// admit sends the object's creation to the webhook and returns its answer.
func (w webhook) admit(obj object) (*admissionv1.AdmissionResponse, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		return nil, fmt.Errorf("%s/%s has no kind", obj.GetNamespace(), obj.GetName())
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("review-" + obj.GetName()),
			Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Namespace: obj.GetNamespace(),
			Name:      obj.GetName(),
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	req := httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	w.mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("webhook answered %d: %s", rec.Code, rec.Body.String())
	}
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
		return nil, fmt.Errorf("webhook answer: %w", err)
	}
	if answer.Response == nil {
		return nil, fmt.Errorf("webhook answered no response: %s", rec.Body.String())
	}
	return answer.Response, nil
}

// describe names an object for a failure message.
func describe(obj object) string {
	return fmt.Sprintf("%s %s/%s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName())
}

// TestWebhookAdmitsEveryObject sends every object of every golden file and
// corpus entry to istiod's validating webhook (Istio's CRD conversion and
// ValidateConfig): none may be rejected or draw a warning.
func TestWebhookAdmitsEveryObject(t *testing.T) {
	trs := translations(t)
	checkCoverage(t, trs)
	wh := newWebhook(t)
	var sent int
	for _, tr := range trs {
		for _, obj := range tr.objects() {
			sent++
			resp, err := wh.admit(obj)
			switch {
			case err != nil:
				t.Errorf("%s: %s: %v", tr.Name, describe(obj), err)
			case !resp.Allowed:
				t.Errorf("%s: istiod's webhook rejects %s: %s", tr.Name, describe(obj), resp.Result.Message)
			case len(resp.Warnings) > 0:
				t.Errorf("%s: istiod's webhook warns about %s: %q", tr.Name, describe(obj), resp.Warnings)
			}
		}
	}
	t.Logf("istiod's webhook admitted %d objects", sent)
}

// TestWebhookRejectsWhatIstioRefuses proves the webhook is reached and
// validates: a golden VirtualService broken as Istio forbids (a
// destination without host) is refused.
func TestWebhookRejectsWhatIstioRefuses(t *testing.T) {
	trs := translations(t)
	var vs object
	for _, tr := range trs {
		if tr.Name == "golden/weighted-backends.golden.yaml" {
			broken := tr.VirtualService.DeepCopy()
			broken.Spec.Http[1].Route[0].Destination.Host = ""
			vs = broken
		}
	}
	if vs == nil {
		t.Fatal("no golden/weighted-backends.golden.yaml")
	}
	resp, err := newWebhook(t).admit(vs)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Allowed {
		t.Fatalf("istiod's webhook admits %s with a destination without host", describe(vs))
	}
	t.Logf("rejected as expected: %s", resp.Result.Message)
}

// envoyFilterWarning is the warning istiod's webhook gives every
// EnvoyFilter whatever it holds (pkg/config/validation/envoyfilter): the
// ratelimit controller has no other Istio API for its filters, so this one
// warning, and no other, is accepted.
const envoyFilterWarning = "EnvoyFilter exposes internal implementation details that may change at any time."

// TestWebhookAdmitsTheOtherControllersObjects sends what the gateway
// controller writes for the default gateway (both modes) and the
// ratelimit controller's EnvoyFilters (every RateLimit option, gateway-wide
// and per route) to istiod's webhook: none may be rejected or warned about.
func TestWebhookAdmitsTheOtherControllersObjects(t *testing.T) {
	wh := newWebhook(t)
	objs := controllerObjects(t)
	var envoyFilters int
	for _, name := range slices.Sorted(maps.Keys(objs)) {
		obj := objs[name]
		resp, err := wh.admit(obj)
		if err == nil && obj.GetKind() == "EnvoyFilter" {
			envoyFilters++
			resp.Warnings = slices.DeleteFunc(resp.Warnings, func(w string) bool { return strings.HasPrefix(w, envoyFilterWarning) })
		}
		switch {
		case err != nil:
			t.Errorf("%s: %s: %v", name, describe(obj), err)
		case !resp.Allowed:
			t.Errorf("%s: istiod's webhook rejects %s: %s", name, describe(obj), resp.Result.Message)
		case len(resp.Warnings) > 0:
			t.Errorf("%s: istiod's webhook warns about %s: %q", name, describe(obj), resp.Warnings)
		}
	}
	t.Logf("istiod's webhook admitted %d objects of the gateway and ratelimit controllers (%d EnvoyFilters)", len(objs), envoyFilters)
}
