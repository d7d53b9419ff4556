package runner

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

func TestWanted(t *testing.T) {
	gateway := func(controllers ...operatorv1alpha1.ControllerSpec) *operatorv1alpha1.APIGateway {
		return &operatorv1alpha1.APIGateway{
			ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName},
			Spec:       operatorv1alpha1.APIGatewaySpec{Controllers: controllers},
		}
	}
	deleting := gateway()
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	for name, tc := range map[string]struct {
		gw   *operatorv1alpha1.APIGateway
		want bool
	}{
		"no APIGateway":          {gw: nil, want: false},
		"APIGateway deleting":    {gw: deleting, want: false},
		"not listed: defaults":   {gw: gateway(), want: true},
		"listed without enabled": {gw: gateway(operatorv1alpha1.ControllerSpec{Name: "ratelimit"}), want: true},
		"enabled":                {gw: gateway(operatorv1alpha1.ControllerSpec{Name: "ratelimit", Enabled: ptr.To(true)}), want: true},
		"disabled":               {gw: gateway(operatorv1alpha1.ControllerSpec{Name: "ratelimit", Enabled: ptr.To(false)}), want: false},
		"scaled to zero":         {gw: gateway(operatorv1alpha1.ControllerSpec{Name: "ratelimit", Replicas: ptr.To[int32](0)}), want: true},
		"another one disabled":   {gw: gateway(operatorv1alpha1.ControllerSpec{Name: "apirule", Enabled: ptr.To(false)}), want: true},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(Wanted(tc.gw, "ratelimit")).To(Equal(tc.want))
		})
	}
}
