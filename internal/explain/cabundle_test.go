package explain

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestClientCABundleReadsCredentialsAsIstiodServesThem: a plain name is a
// Secret, never a ConfigMap of that name (istiod serves no client CA from
// it: the handshake fails); configmap:// names a ConfigMap of the gateway's
// namespace; a -cacert Secret that exists is the only one read.
func TestClientCABundleReadsCredentialsAsIstiodServesThem(t *testing.T) {
	objs := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "ca"}, Data: map[string]string{"ca.crt": "configmap-ca"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "ca"}, Data: map[string]string{"ca.crt": "other-ns"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "cred"}, Data: map[string][]byte{"ca.crt": []byte("cred-ca.crt"), "cacert": []byte("cred-cacert")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "both-cacert"}, Data: map[string][]byte{"tls.crt": []byte("no ca")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "both"}, Data: map[string][]byte{"ca.crt": []byte("both")}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"ca", "", false}, // a plain name is a Secret: the ConfigMap "ca" is not read
		{"configmap://gw/ca", "configmap-ca", true},
		{"configmap://other/ca", "", false}, // another namespace
		{"cred", "cred-cacert", true},       // cacert before ca.crt
		{"kubernetes://cred", "cred-cacert", true},
		{"kubernetes://other/cred", "", false},
		{"cred-cacert", "cred-cacert", true}, // no cred-cacert Secret: cred's
		{"both-cacert", "", false},           // it exists: no fallback to "both"
	} {
		got, ok := clientCABundle(context.Background(), c, "gw", tc.name)
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("%s: got %q, %t; want %q, %t", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
