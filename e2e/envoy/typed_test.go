package envoy

import (
	"testing"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	localratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func structOf(t *testing.T, v map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestUnpackTypedReadsTypedStructsAsEnvoy: a filter's config arrives as
// the message itself or as a TypedStruct (udpa or xds) of its type, the
// form EnvoyFilters write and istiod passes through; another type is not
// the filter's, and a field the message lacks is an error, as in Envoy.
func TestUnpackTypedReadsTypedStructsAsEnvoy(t *testing.T) {
	const rateLimit = "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit"
	value := map[string]any{"domain": "tenant-a", "failure_mode_deny": true, "timeout": "0.100s"}
	cases := []struct {
		name    string
		in      *anypb.Any
		ok, err bool
		domain  string
	}{
		{name: "the message", in: anyOf(t, &ratelimitv3.RateLimit{Domain: "tenant-a"}), ok: true, domain: "tenant-a"},
		{name: "udpa TypedStruct", in: anyOf(t, &udpatypev1.TypedStruct{TypeUrl: rateLimit, Value: structOf(t, value)}), ok: true, domain: "tenant-a"},
		{name: "xds TypedStruct", in: anyOf(t, &xdstypev3.TypedStruct{TypeUrl: rateLimit, Value: structOf(t, value)}), ok: true, domain: "tenant-a"},
		{name: "TypedStruct of another filter", in: anyOf(t, &udpatypev1.TypedStruct{
			TypeUrl: "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit", Value: structOf(t, map[string]any{"stat_prefix": "x"})})},
		{name: "another message", in: anyOf(t, &localratelimitv3.LocalRateLimit{StatPrefix: "x"})},
		{name: "unknown field", in: anyOf(t, &udpatypev1.TypedStruct{TypeUrl: rateLimit, Value: structOf(t, map[string]any{"domian": "tenant-a"})}), err: true},
		{name: "nothing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := &ratelimitv3.RateLimit{}
			ok, err := UnpackTyped(c.in, cfg)
			if (err != nil) != c.err {
				t.Fatalf("error %v, want error %t", err, c.err)
			}
			if ok != c.ok {
				t.Fatalf("read %t, want %t", ok, c.ok)
			}
			if cfg.GetDomain() != c.domain {
				t.Errorf("domain %q, want %q", cfg.GetDomain(), c.domain)
			}
			if c.name == "udpa TypedStruct" && (!cfg.GetFailureModeDeny() || cfg.GetTimeout().AsDuration().Milliseconds() != 100) {
				t.Errorf("fields lost in the conversion: %v", cfg)
			}
		})
	}
}
