package controller

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The golden VirtualServices and access policies of the translation are
// what the controller writes in Istio mode: the real Istio CRDs (their
// schemas and CEL rules) must admit them, as TestGoldenHTTPRoutesAreAdmitted
// checks for HTTPRoute mode.
func TestGoldenVirtualServicesAreAdmitted(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "translate", "testdata", "*.golden.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	paths = slices.DeleteFunc(paths, func(p string) bool { return strings.HasSuffix(p, ".httproute.golden.yaml") })
	NewWithT(t).Expect(paths).NotTo(BeEmpty())
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			g := NewWithT(t)
			raw, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred())
			var golden struct {
				VirtualService *networkingv1.VirtualService
				Workloads      []struct {
					AuthorizationPolicy   *securityv1.AuthorizationPolicy
					RequestAuthentication *securityv1.RequestAuthentication
					CustomPolicy          *securityv1.AuthorizationPolicy
				}
			}
			g.Expect(yaml.Unmarshal(raw, &golden)).To(Succeed())
			g.Expect(golden.VirtualService).NotTo(BeNil())
			objs := []client.Object{golden.VirtualService}
			for _, w := range golden.Workloads {
				objs = append(objs, w.AuthorizationPolicy)
				if w.RequestAuthentication != nil {
					objs = append(objs, w.RequestAuthentication)
				}
				if w.CustomPolicy != nil {
					objs = append(objs, w.CustomPolicy)
				}
			}
			for _, obj := range objs {
				obj.SetOwnerReferences(nil) // the golden owner does not exist
				g.Expect(k8sClient.Create(context.Background(), obj, client.DryRunAll)).To(Succeed(), "%T %s", obj, obj.GetName())
			}
		})
	}
}
