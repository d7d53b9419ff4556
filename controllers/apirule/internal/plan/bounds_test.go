package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// apiRuleSchema reads the APIRule CRD's v1alpha1 schema from
// config/crd/bases, as make manifests writes it.
func apiRuleSchema(t *testing.T) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "config", "crd", "bases", "gateway.portico.dev_apirules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == porticov1alpha1.GroupVersion.Version {
			return *v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("the APIRule CRD has no version %s", porticov1alpha1.GroupVersion.Version)
	return apiextensionsv1.JSONSchemaProps{}
}

// at walks a schema by property names; "[]" steps into items, "{}" into
// additionalProperties.
func at(t *testing.T, s apiextensionsv1.JSONSchemaProps, path string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, step := range strings.Split(path, ".") {
		switch step {
		case "[]":
			if s.Items == nil || s.Items.Schema == nil {
				t.Fatalf("%s: no items at %s", path, step)
			}
			s = *s.Items.Schema
		case "{}":
			if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
				t.Fatalf("%s: no additionalProperties at %s", path, step)
			}
			s = *s.AdditionalProperties.Schema
		default:
			next, ok := s.Properties[step]
			if !ok {
				t.Fatalf("%s: no property %s", path, step)
			}
			s = next
		}
	}
	return s
}

func value(p *int64) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

func number(p *float64) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// Every bound the checks repeat in Go is the CRD's: a marker changed
// without its constant (or the other way round) fails here, before the
// controller and the API server disagree on what an APIRule may say.
func TestBoundsMatchTheCRD(t *testing.T) {
	root := apiRuleSchema(t)
	spec := at(t, root, "spec")
	rule := "spec.rules.[]."
	for _, b := range []struct {
		path, bound string
		got         func(apiextensionsv1.JSONSchemaProps) string
		want        int
	}{
		{rule + "backends", "maxItems", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxItems) }, porticov1alpha1.MaxWeightedBackends},
		{rule + "backends", "minItems", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MinItems) }, minWeightedBackends},
		{rule + "match.headers", "maxItems", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxItems) }, porticov1alpha1.MaxRuleMatches},
		{rule + "match.queryParams", "maxItems", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxItems) }, porticov1alpha1.MaxRuleMatches},
		{rule + "match.headers.[].name", "maxLength", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxLength) }, maxMatchNameLength},
		{rule + "match.queryParams.[].name", "maxLength", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxLength) }, maxMatchNameLength},
		{rule + "match.headers.[].exact", "maxLength", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxLength) }, maxMatchValueLength},
		{rule + "match.headers.[].prefix", "maxLength", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxLength) }, maxMatchValueLength},
		{rule + "match.headers.[].regex", "maxLength", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxLength) }, maxMatchValueLength},
		{rule + "match.queryParams.[].exact", "maxLength", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxLength) }, maxMatchValueLength},
		{rule + "match.queryParams.[].regex", "maxLength", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxLength) }, maxMatchValueLength},
		{rule + "retries.attempts", "minimum", func(s apiextensionsv1.JSONSchemaProps) string { return number(s.Minimum) }, minRetryAttempts},
		{rule + "retries.attempts", "maximum", func(s apiextensionsv1.JSONSchemaProps) string { return number(s.Maximum) }, maxRetryAttempts},
		{rule + "retries.codes.[]", "minimum", func(s apiextensionsv1.JSONSchemaProps) string { return number(s.Minimum) }, minRetryCode},
		{rule + "retries.codes.[]", "maximum", func(s apiextensionsv1.JSONSchemaProps) string { return number(s.Maximum) }, maxRetryCode},
		{rule + "request.headers", "maxProperties", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxProperties) }, maxHeaders},
		{rule + "request.headers.{}", "maxLength", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxLength) }, maxHeaderValue},
		{rule + "request.cookies", "maxProperties", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxProperties) }, maxCookies},
		{rule + "rewrite.path", "maxLength", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxLength) }, maxRewriteLength},
		{rule + "rewrite.prefix", "maxLength", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxLength) }, maxRewriteLength},
		{rule + "request.removeHeaders", "maxItems", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxItems) }, maxRemovedHeaders},
		{rule + "response.set", "maxProperties", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxProperties) }, maxResponseHeaders},
		{rule + "response.set.{}", "maxLength", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxLength) }, maxHeaderValue},
		{rule + "response.add", "maxItems", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxItems) }, maxResponseHeaders},
		{rule + "response.remove", "maxItems", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxItems) }, maxResponseHeaders},
		{rule + "clientAddresses.allow", "maxItems", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxItems) }, maxAddressBlocks},
		{rule + "clientAddresses.deny", "maxItems", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxItems) }, maxAddressBlocks},
		{rule + "clientAddresses.allow.[]", "maxLength", func(s apiextensionsv1.JSONSchemaProps) string { return value(s.MaxLength) }, maxAddressBlockSize},
	} {
		if got := b.got(at(t, root, b.path)); got != fmt.Sprint(b.want) {
			t.Errorf("%s %s is %s in the CRD but %d in the checks", b.path, b.bound, got, b.want)
		}
	}
	// Bounds the CRD states in CEL.
	for _, c := range []struct {
		where string
		rules apiextensionsv1.ValidationRules
		want  string
	}{
		{"spec", spec.XValidations, fmt.Sprintf("self.rules.size() <= %d", porticov1alpha1.MaxHTTPRouteRules)},
		{rule + "match", at(t, root, rule+"match").XValidations, fmt.Sprintf(") <= %d", porticov1alpha1.MaxRuleMatches)},
		{"spec", spec.XValidations, fmt.Sprintf(": 0).sum() <= %d", porticov1alpha1.MaxResponseHeadersPerAPIRule)},
		{"spec", spec.XValidations, fmt.Sprintf(": 0).sum() <= %d", porticov1alpha1.MaxRemovedHeadersPerAPIRule)},
		{"spec", spec.XValidations, fmt.Sprintf(": 0).sum() <= %d", porticov1alpha1.MaxAddressBlocksPerAPIRule)},
	} {
		if !slices.ContainsFunc(c.rules, func(r apiextensionsv1.ValidationRule) bool { return strings.HasSuffix(r.Rule, c.want) }) {
			t.Errorf("%s: no CEL rule of the CRD ends with %q, the bound of the checks", c.where, c.want)
		}
	}
}
