package contract

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func TestTruncate(t *testing.T) {
	tests := map[string]struct {
		in    string
		limit int
		want  string
	}{
		"short message unchanged": {
			in: "deployment apirule-controller applied", limit: 64, want: "deployment apirule-controller applied",
		},
		"exactly at the limit unchanged": {
			in: strings.Repeat("a", 20), limit: 20, want: strings.Repeat("a", 20),
		},
		"one byte over is cut with the note": {
			in: strings.Repeat("a", 21), limit: 20, want: strings.Repeat("a", 20-len(TruncatedNote)) + TruncatedNote,
		},
		"never splits a multi-byte character": {
			// "é" is 2 bytes; the cut point falls in the middle of the third one.
			in: "éééééééééé" + strings.Repeat("x", 40), limit: 5 + len(TruncatedNote), want: "éé" + TruncatedNote,
		},
		"invalid UTF-8 replaced even when short": {
			in: "bad \xff byte", limit: 64, want: "bad \uFFFD byte",
		},
		"limit smaller than the note cuts without it": {
			in: "abcdefgh", limit: 3, want: "abc",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got := Truncate(tc.in, tc.limit)
			g.Expect(got).To(Equal(tc.want))
			g.Expect(len(got)).To(BeNumerically("<=", tc.limit))
			g.Expect(utf8.ValidString(got)).To(BeTrue())
		})
	}
}

func TestTruncateKeepsEveryLimit(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("日本語のエラー ", 5000) // 3-byte characters
	for _, limit := range []int{ControllerStatusMaxLength, ConditionMaxLength, EventNoteMaxLength} {
		got := Truncate(long, limit)
		g.Expect(len(got)).To(BeNumerically("<=", limit))
		g.Expect(len(got)).To(BeNumerically(">", limit-utf8.UTFMax-len(TruncatedNote)), "cuts no more than needed")
		g.Expect(got).To(HaveSuffix(TruncatedNote))
		g.Expect(utf8.ValidString(got)).To(BeTrue())
	}
}

// The limits must follow the generated CRD, or a status write fails.
func TestLimitsMatchTheAPIGatewayCRD(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "operator.portico.dev_apigateways.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(yaml.Unmarshal(raw, crd)).To(Succeed())
	g.Expect(crd.Spec.Versions).NotTo(BeEmpty())
	for _, v := range crd.Spec.Versions {
		status := v.Schema.OpenAPIV3Schema.Properties["status"]
		message := status.Properties["controllers"].Items.Schema.Properties["message"]
		g.Expect(message.MaxLength).To(HaveValue(BeEquivalentTo(ControllerStatusMaxLength)), "version %s", v.Name)
		imageID := status.Properties["controllers"].Items.Schema.Properties["imageID"]
		g.Expect(imageID.MaxLength).To(HaveValue(BeEquivalentTo(ImageIDMaxLength)), "version %s", v.Name)
		condition := status.Properties["conditions"].Items.Schema.Properties["message"]
		g.Expect(condition.MaxLength).To(HaveValue(BeEquivalentTo(ConditionMaxLength)), "version %s", v.Name)
	}
}
