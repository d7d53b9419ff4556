package controller

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
	"github.com/portico-dev/portico/internal/owned"
)

// answerLog records the answers to writes (POST, PUT, PATCH): their media
// type and body.
type answerLog struct {
	mu      sync.Mutex
	answers []answerSeen
}

type answerSeen struct {
	method, contentType string
	body                []byte
}

func (l *answerLog) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err != nil || req.Method == http.MethodGet || req.Method == http.MethodDelete {
			return resp, err
		}
		body, readErr := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if readErr != nil {
			return resp, readErr
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.answers = append(l.answers, answerSeen{method: req.Method, contentType: resp.Header.Get("Content-Type"), body: body})
		return resp, nil
	})
}

// last is the last answer seen.
func (l *answerLog) last() answerSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.answers) == 0 {
		return answerSeen{}
	}
	return l.answers[len(l.answers)-1]
}

// partial reports whether the answer is a PartialObjectMetadata (protobuf,
// as the API server sends it when asked for, or JSON).
func (a answerSeen) partial() bool {
	return bytes.Contains(a.body, []byte("PartialObjectMetadata"))
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// metadataAnswersClient is the controller's write client
// (owned.MetadataAnswers) on the test API server, its answers logged.
func metadataAnswersClient(t *testing.T) (client.Client, *answerLog) {
	t.Helper()
	g := NewWithT(t)
	log := &answerLog{}
	cfg := rest.CopyConfig(testConfig)
	cfg.Wrap(log.wrap)
	httpClient, err := rest.HTTPClientFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme(), Mapper: mapper, HTTPClient: httpClient})
	g.Expect(err).NotTo(HaveOccurred())
	writes, err := owned.MetadataAnswers(c, cfg, httpClient)
	g.Expect(err).NotTo(HaveOccurred())
	return writes, log
}

// TestWritesAreAnsweredWithMetadataOnly: the real API server answers the
// controller's creates, updates and patches of custom resources (Istio's,
// the Gateway API's, APIRules and their status) with the object's metadata
// alone, which becomes the object's (UID, resourceVersion, generation,
// owner references, the field manager); its refusals are the errors the
// controller branches on (name taken, conflict, invalid with the kind).
func TestWritesAreAnsweredWithMetadataOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	writes, log := metadataAnswersClient(t)
	owner := metav1.OwnerReference{APIVersion: "gateway.portico.dev/v1alpha1", Kind: "APIRule", Name: "answers", UID: types.UID("6b3c1c2e-0000-4000-8000-000000000001"), Controller: ptr.To(true)}
	vs := &networkingv1.VirtualService{
		ObjectMeta: metav1.ObjectMeta{Name: "answers", Namespace: ns, Labels: map[string]string{plan.LabelManagedBy: plan.ManagedBy},
			OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: networkingv1alpha3.VirtualService{Hosts: []string{"answers.example.com"}, Gateways: []string{"istio-system/public"},
			Http: []*networkingv1alpha3.HTTPRoute{{Route: []*networkingv1alpha3.HTTPRouteDestination{{Destination: &networkingv1alpha3.Destination{Host: "answers"}}}}}},
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, vs) })

	g.Expect(writes.Create(ctx, vs, client.FieldOwner(FieldManager))).To(Succeed())
	answer := log.last()
	g.Expect(answer.contentType).To(Equal(runtime.ContentTypeProtobuf), "the create's answer")
	g.Expect(answer.partial()).To(BeTrue(), "the create's answer is a PartialObjectMetadata")
	g.Expect(string(answer.body)).NotTo(ContainSubstring("answers.example.com"), "the create's answer holds no spec")
	g.Expect(vs.UID).NotTo(BeEmpty())
	g.Expect(vs.ResourceVersion).NotTo(BeEmpty())
	g.Expect(vs.Generation).To(Equal(int64(1)))
	g.Expect(vs.OwnerReferences).To(Equal([]metav1.OwnerReference{owner}))
	g.Expect(vs.ManagedFields).To(ContainElement(HaveField("Manager", FieldManager)), "the field manager was sent")
	g.Expect(vs.Spec.GetHosts()).To(Equal([]string{"answers.example.com"}), "the spec stays as sent")

	stored := &networkingv1.VirtualService{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(vs), stored)).To(Succeed())
	g.Expect(stored.UID).To(Equal(vs.UID))
	g.Expect(stored.ResourceVersion).To(Equal(vs.ResourceVersion))

	again := vs.DeepCopy()
	again.ResourceVersion, again.UID = "", ""
	err := writes.Create(ctx, again)
	g.Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), "a taken name: %v", err)

	firstVersion := vs.ResourceVersion
	vs.Spec.Hosts = []string{"answers-2.example.com"}
	g.Expect(writes.Update(ctx, vs, client.FieldOwner(FieldManager))).To(Succeed())
	g.Expect(string(log.last().body)).NotTo(ContainSubstring("answers-2.example.com"), "the update's answer holds no spec")
	g.Expect(vs.ResourceVersion).NotTo(Equal(firstVersion))
	g.Expect(vs.Generation).To(Equal(int64(2)))
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(vs), stored)).To(Succeed())
	g.Expect(stored.Spec.GetHosts()).To(Equal([]string{"answers-2.example.com"}))

	stale := vs.DeepCopy()
	stale.ResourceVersion = firstVersion
	stale.Spec.Hosts = []string{"stale.example.com"}
	err = writes.Update(ctx, stale)
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "an update at a version that is gone: %v", err)
	g.Expect(stale.ResourceVersion).To(Equal(firstVersion), "a refused write changes nothing")

	gone := vs.DeepCopy()
	gone.Name = "answers-missing"
	err = writes.Update(ctx, gone)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "an update of no object: %v", err)

	// The HTTPRoute check of converge reads the kind of an Invalid error.
	route := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "answers", Namespace: ns},
		Spec: gwapiv1.HTTPRouteSpec{Hostnames: []gwapiv1.Hostname{"-not-a-host-"}}}
	err = writes.Create(ctx, route)
	var status apierrors.APIStatus
	g.Expect(apierrors.IsInvalid(err) && errors.As(err, &status)).To(BeTrue(), "an invalid route: %v", err)
	g.Expect(status.Status().Details).NotTo(BeNil())
	g.Expect(status.Status().Details.Kind).To(Equal("HTTPRoute"))
}

// TestPatchesAreAnsweredWithMetadataOnly: a finalizer patch and a status
// patch, both with the optimistic lock, as setFinalizer and writeStatus
// send them, on a Portico resource no controller of this package writes
// (an APIRule would be the running controller's to patch too).
func TestPatchesAreAnsweredWithMetadataOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	writes, log := metadataAnswersClient(t)
	limit := &porticov1alpha1.RateLimit{
		ObjectMeta: metav1.ObjectMeta{Name: "answers-patch", Namespace: ns},
		Spec: porticov1alpha1.RateLimitSpec{
			TargetRef: porticov1alpha1.TargetReference{Kind: porticov1alpha1.TargetAPIRule, Name: "answers-patch-target"},
			Local:     &porticov1alpha1.TokenBucket{MaxTokens: 7, TokensPerFill: 1, FillInterval: metav1.Duration{Duration: time.Second}},
		},
	}
	g.Expect(k8sClient.Create(ctx, limit)).To(Succeed())
	t.Cleanup(func() {
		latest := &porticov1alpha1.RateLimit{}
		if k8sClient.Get(ctx, client.ObjectKeyFromObject(limit), latest) == nil {
			latest.Finalizers = nil
			_ = k8sClient.Update(ctx, latest)
			_ = k8sClient.Delete(ctx, latest)
		}
	})

	updated := limit.DeepCopy()
	updated.Finalizers = append(updated.Finalizers, "example.com/answers")
	g.Expect(writes.Patch(ctx, updated, client.MergeFromWithOptions(limit, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	g.Expect(log.last().partial()).To(BeTrue(), "the answer is a PartialObjectMetadata")
	g.Expect(string(log.last().body)).NotTo(ContainSubstring("answers-patch-target"), "the patch's answer holds no spec")
	g.Expect(updated.Finalizers).To(ContainElement("example.com/answers"))
	g.Expect(updated.ResourceVersion).NotTo(Equal(limit.ResourceVersion))

	// The same kind of patch on the old version: the lock refuses it.
	stale := limit.DeepCopy()
	stale.Labels = map[string]string{"stale": "yes"}
	err := writes.Patch(ctx, stale, client.MergeFromWithOptions(limit, client.MergeFromWithOptimisticLock{}))
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "a patch at a version that is gone: %v", err)

	after := updated.DeepCopy()
	meta.SetStatusCondition(&after.Status.Conditions, metav1.Condition{Type: porticov1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: "Enforced", Message: "answers enforced"})
	g.Expect(writes.Status().Patch(ctx, after, client.MergeFromWithOptions(updated, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	g.Expect(log.last().partial()).To(BeTrue(), "the answer is a PartialObjectMetadata")
	g.Expect(string(log.last().body)).NotTo(ContainSubstring("answers enforced"), "the status patch's answer holds no status")
	g.Expect(after.ResourceVersion).NotTo(Equal(updated.ResourceVersion))
	g.Expect(after.Status.Conditions).To(HaveLen(1), "the status stays as sent")

	stored := &porticov1alpha1.RateLimit{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(limit), stored)).To(Succeed())
	g.Expect(stored.ResourceVersion).To(Equal(after.ResourceVersion))
	g.Expect(stored.Finalizers).To(ContainElement("example.com/answers"))
	g.Expect(stored.Status.Conditions).To(ContainElement(HaveField("Message", "answers enforced")))

	err = writes.Status().Patch(ctx, stale, client.MergeFromWithOptions(limit, client.MergeFromWithOptimisticLock{}))
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "a status patch at a version that is gone: %v", err)
}
