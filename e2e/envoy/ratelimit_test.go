package envoy

import (
	"reflect"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestDescriptors(t *testing.T) {
	generic := &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_GenericKey_{GenericKey: &routev3.RateLimit_Action_GenericKey{DescriptorValue: "team-a"}}}
	client := func(skip bool) *routev3.RateLimit_Action {
		return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_RequestHeaders_{RequestHeaders: &routev3.RateLimit_Action_RequestHeaders{
			HeaderName: "x-client", DescriptorKey: "client", SkipIfAbsent: skip}}}
	}
	admin := func(expect bool) *routev3.RateLimit_Action {
		return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_HeaderValueMatch_{HeaderValueMatch: &routev3.RateLimit_Action_HeaderValueMatch{
			DescriptorKey: "path", DescriptorValue: "admin", ExpectMatch: wrapperspb.Bool(expect),
			Headers: []*routev3.HeaderMatcher{{Name: ":path", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "/admin"}}}}}}}}
	}
	remote := &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_RemoteAddress_{RemoteAddress: &routev3.RateLimit_Action_RemoteAddress{}}}
	subject := &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_Metadata{Metadata: &routev3.RateLimit_Action_MetaData{
		DescriptorKey: "sub", Source: routev3.RateLimit_Action_MetaData_DYNAMIC, SkipIfAbsent: true,
		MetadataKey: &metadatav3.MetadataKey{Key: FilterJWTAuthn, Path: []*metadatav3.MetadataKey_PathSegment{{Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: "payload"}}, {Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: "sub"}}}}}}}
	limit := func(actions ...*routev3.RateLimit_Action) *routev3.RateLimit {
		return &routev3.RateLimit{Actions: actions}
	}
	withClient := Request{Path: "/admin/x", Headers: map[string]string{"X-Client": "c1"}}
	cases := map[string]struct {
		limits []*routev3.RateLimit
		req    Request
		md     Metadata
		want   [][]Entry
	}{
		"generic key and a header":            {[]*routev3.RateLimit{limit(generic, client(false))}, withClient, nil, [][]Entry{{{"generic_key", "team-a"}, {"client", "c1"}}}},
		"a missing header leaves it out":      {[]*routev3.RateLimit{limit(generic, client(false)), limit(generic)}, Request{Path: "/"}, nil, [][]Entry{{{"generic_key", "team-a"}}}},
		"skip_if_absent leaves out the entry": {[]*routev3.RateLimit{limit(generic, client(true))}, Request{Path: "/"}, nil, [][]Entry{{{"generic_key", "team-a"}}}},
		"a header value match":                {[]*routev3.RateLimit{limit(admin(true)), limit(admin(false))}, withClient, nil, [][]Entry{{{"path", "admin"}}}},
		"an inverted header value match":      {[]*routev3.RateLimit{limit(admin(true)), limit(admin(false))}, Request{Path: "/shop"}, nil, [][]Entry{{{"path", "admin"}}}},
		"the remote address":                  {[]*routev3.RateLimit{limit(remote)}, Request{Path: "/"}, nil, [][]Entry{{{"remote_address", "198.51.100.9"}}}},
		"a token's subject":                   {[]*routev3.RateLimit{limit(generic, subject)}, Request{Path: "/"}, Metadata{FilterJWTAuthn: {"payload": map[string]any{"sub": "alice"}}}, [][]Entry{{{"generic_key", "team-a"}, {"sub", "alice"}}}},
		"no token: the entry is left out":     {[]*routev3.RateLimit{limit(generic, subject)}, Request{Path: "/"}, nil, [][]Entry{{{"generic_key", "team-a"}}}},
	}
	for name, c := range cases {
		got, err := Descriptors(c.limits, c.req, "198.51.100.9", c.md)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", name, got, err, c.want)
		}
	}
	if _, err := Descriptors([]*routev3.RateLimit{{Stage: wrapperspb.UInt32(1), Actions: []*routev3.RateLimit_Action{generic}}}, Request{}, "", nil); err == nil {
		t.Error("a stage was not refused")
	}
}
