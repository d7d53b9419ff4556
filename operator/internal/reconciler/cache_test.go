package reconciler_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/operator/internal/reconciler"
)

// The operator's cache keeps no Secret value but the Redis address.
func TestTransformSecret(t *testing.T) {
	tests := map[string]struct {
		data map[string][]byte
		want map[string][]byte
	}{
		"the Redis Secret: keys, and the address only": {
			data: map[string][]byte{"address": []byte("redis:6379"), "password": []byte("s3cret"), "ca.crt": []byte("PEM")},
			want: map[string][]byte{"address": []byte("redis:6379"), "password": nil, "ca.crt": nil},
		},
		"another Secret: its keys only": {
			data: map[string][]byte{"tls.key": []byte("KEY"), "tls.crt": []byte("CRT")},
			want: map[string][]byte{"tls.key": nil, "tls.crt": nil},
		},
		"an empty Secret": {data: nil, want: map[string][]byte{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			in := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "redis", Namespace: "portico-system", UID: "u", ResourceVersion: "7",
					Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"czNjcmV0"}}`}},
				Data: tc.data,
			}
			out, err := reconciler.TransformSecret(in)
			g.Expect(err).NotTo(HaveOccurred())
			secret := out.(*corev1.Secret)
			g.Expect(secret.Data).To(Equal(tc.want))
			g.Expect(secret.Annotations).To(BeEmpty(), "kubectl's last-applied annotation holds the values")
			g.Expect(secret.Name).To(Equal("redis"))
			g.Expect(secret.ResourceVersion).To(Equal("7"))
		})
	}
	other, err := reconciler.TransformSecret("not a Secret")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(other).To(Equal("not a Secret"))
}
