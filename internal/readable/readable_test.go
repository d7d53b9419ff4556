package readable

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func service(ns, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func names(svcs []corev1.Service) []string {
	var out []string
	for _, s := range svcs {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

// reader serves three tenants' Services and answers a list with err(ns)
// before listing (ns is ClusterWide for a list across the cluster).
func reader(err func(ns string) error) client.Reader {
	return fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithObjects(service("team-a", "orders"), service("team-b", "billing"), service("team-c", "secret")).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				lo := &client.ListOptions{}
				lo.ApplyOptions(opts)
				if e := err(lo.Namespace); e != nil {
					return e
				}
				return c.List(ctx, list, opts...)
			},
		}).Build()
}

func forbidden(ns string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "", errors.New("ns "+ns))
}

func TestList(t *testing.T) {
	tests := map[string]struct {
		err      func(ns string) error
		fallback []string
		want     []string
		hidden   []string
		listed   []string
		absent   bool
		wantErr  string
		visible  map[string]bool
	}{
		"cluster-wide reader sees every namespace": {
			err:      func(string) error { return nil },
			fallback: []string{"team-a"},
			want:     []string{"team-a/orders", "team-b/billing", "team-c/secret"},
			visible:  map[string]bool{"team-a": true, "team-c": true},
		},
		"namespace-only reader: its own namespaces, the rest hidden": {
			err: func(ns string) error {
				if ns == ClusterWide || ns == "team-c" {
					return forbidden(ns)
				}
				return nil
			},
			fallback: []string{"team-b", "team-a", "team-c", "team-a"},
			want:     []string{"team-a/orders", "team-b/billing"},
			hidden:   []string{ClusterWide, "team-c"},
			listed:   []string{"team-a", "team-b"},
			visible:  map[string]bool{"team-a": true, "team-b": true, "team-c": false, "team-d": false},
		},
		"kind not installed": {
			err: func(string) error {
				return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "x", Kind: "Y"}}
			},
			absent:  true,
			visible: map[string]bool{"team-a": false},
		},
		"another error is returned": {
			err:     func(string) error { return apierrors.NewServiceUnavailable("down") },
			wantErr: "list across the cluster: down",
		},
		"another error in a namespace is returned": {
			err: func(ns string) error {
				if ns == ClusterWide {
					return forbidden(ns)
				}
				return apierrors.NewTimeoutError("slow", 1)
			},
			fallback: []string{"team-a"},
			wantErr:  "list in namespace team-a",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := List(context.Background(), reader(tc.err),
				func() client.ObjectList { return &corev1.ServiceList{} },
				func(l client.ObjectList) []corev1.Service { return l.(*corev1.ServiceList).Items },
				tc.fallback)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(names(got.Items)).To(ConsistOf(tc.want))
			g.Expect(got.Hidden).To(Equal(tc.hidden))
			g.Expect(got.Listed).To(Equal(tc.listed))
			g.Expect(got.Absent).To(Equal(tc.absent))
			for ns, want := range tc.visible {
				g.Expect(got.Visible(ns)).To(Equal(want), "Visible(%q)", ns)
			}
		})
	}
}
