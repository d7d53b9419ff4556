package v1alpha1

import (
	"testing"

	"k8s.io/utils/ptr"
)

func TestControllerEnabled(t *testing.T) {
	tests := []struct {
		name string
		spec APIGatewaySpec
		want bool
	}{
		{name: "not listed: its defaults enable it", spec: APIGatewaySpec{}, want: true},
		{name: "listed without enabled", spec: APIGatewaySpec{Controllers: []ControllerSpec{{Name: "apirule"}}}, want: true},
		{name: "listed, enabled", spec: APIGatewaySpec{Controllers: []ControllerSpec{{Name: "apirule", Enabled: ptr.To(true)}}}, want: true},
		{name: "listed, disabled", spec: APIGatewaySpec{Controllers: []ControllerSpec{{Name: "apirule", Enabled: ptr.To(false)}}}, want: false},
		{name: "another controller disabled", spec: APIGatewaySpec{Controllers: []ControllerSpec{{Name: "ratelimit", Enabled: ptr.To(false)}}}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.spec.ControllerEnabled("apirule"); got != tt.want {
				t.Errorf("ControllerEnabled(apirule) = %t, want %t", got, tt.want)
			}
		})
	}
}
