package quarantine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/testenv"
)

// kinds are the types of the tests' scheme beyond those testenv.Scheme
// always has.
var kinds = []func(*runtime.Scheme) error{porticov1alpha1.AddToScheme, networkingv1.AddToScheme}

// testScheme is the unit tests' scheme; the envtest test's is env.Scheme,
// the same.
var testScheme = testenv.Scheme(kinds...)

const (
	goodTime = `"2026-01-01T00:00:00Z"`
	// badTime passes the API server's date-time format, not time.Parse.
	badTime = `"2026-01-01T00:00:00z"`
)

// apiRule returns an APIRule's JSON with the given spec hosts and condition time.
func apiRule(name, hosts, transition string) string {
	return fmt.Sprintf(`{"apiVersion":"gateway.portico.dev/v1alpha1","kind":"APIRule",`+
		`"metadata":{"name":%q,"namespace":"team-a","uid":"uid-%s","resourceVersion":"7","labels":{"app":"x"}},`+
		`"spec":{"hosts":%s,"gateway":"istio-system/public"},`+
		`"status":{"observedGeneration":1,"conditions":[{"type":"Ready","status":"True","reason":"Applied","message":"",`+
		`"lastTransitionTime":%s}]}}`, name, name, hosts, transition)
}

// istio returns an Istio object's JSON with the given status observedGeneration.
func istio(kind, name, observedGeneration string) string {
	return fmt.Sprintf(`{"apiVersion":"networking.istio.io/v1","kind":%q,`+
		`"metadata":{"name":%q,"namespace":"team-b","uid":"uid-%s","resourceVersion":"9"},`+
		`"spec":{},"status":{"observedGeneration":%s}}`, kind, name, name, observedGeneration)
}

var (
	goodRule       = apiRule("good", `["good.example.com"]`, goodTime)
	badStatusRule  = apiRule("bad-status", `["bad.example.com"]`, badTime)
	badSpecRule    = apiRule("bad-spec", `5`, goodTime)
	goodGateway    = istio("Gateway", "good-gw", `"3"`)
	badGateway     = istio("Gateway", "bad-gw", `"not-a-number"`)
	badVirtualSvc  = istio("VirtualService", "bad-vs", `"not-a-number"`)
	goodVirtualSvc = istio("VirtualService", "good-vs", `2`)
)

// item strips apiVersion and kind, as built-in lists serve their items.
func item(obj string) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &m); err != nil {
		panic(err)
	}
	delete(m, "apiVersion")
	delete(m, "kind")
	return string(marshal(m))
}

func list(apiVersion, kind string, items ...string) string {
	return fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"resourceVersion":"10"},"items":[%s]}`,
		apiVersion, kind, strings.Join(items, ","))
}

func service(name, ports string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Service","metadata":{"name":%q,"namespace":"team-a","uid":"uid-%s"},"spec":{"ports":%s}}`,
		name, name, ports)
}

// reasons renders reports as "Kind/name:Reason" for comparison.
func reasons(reports []Report) []string {
	out := []string{}
	for _, r := range reports {
		if r.Err == nil {
			panic("report without error")
		}
		out = append(out, r.GVK.Kind+"/"+r.Name+":"+string(r.Reason))
	}
	return out
}

// typedDecode decodes JSON as the typed clients do.
func typedDecode(t *testing.T, raw []byte) runtime.Object {
	t.Helper()
	obj, _, err := serializer.NewCodecFactory(testScheme).UniversalDeserializer().Decode(raw, nil, nil)
	if err != nil {
		t.Fatalf("the output does not decode: %v\n%s", err, raw)
	}
	return obj
}

func TestTheBadValuesDoNotDecode(t *testing.T) {
	// The premise of the package: these objects break typed decoding.
	f := newFilter(testScheme)
	for _, obj := range []string{badStatusRule, badSpecRule, badGateway, badVirtualSvc} {
		gvk, ok := f.kindOf([]byte(obj))
		if !ok {
			t.Fatalf("kind of %s not recognized", obj)
		}
		if err := f.decode([]byte(obj), gvk); err == nil {
			t.Errorf("%s decodes", obj)
		}
	}
	for _, obj := range []string{goodRule, goodGateway, goodVirtualSvc} {
		gvk, _ := f.kindOf([]byte(obj))
		if err := f.decode([]byte(obj), gvk); err != nil {
			t.Errorf("%s does not decode: %v", obj, err)
		}
	}
}

func TestDocument(t *testing.T) {
	cases := []struct {
		name      string
		body      string
		unchanged bool
		items     []string // names expected in a list, in order
		noStatus  []string // names expected without status
		reports   []string
	}{
		{name: "good object", body: goodRule, unchanged: true},
		{name: "bad lastTransitionTime", body: badStatusRule, noStatus: []string{"bad-status"},
			reports: []string{"APIRule/bad-status:StatusRemoved"}},
		{name: "bad Istio Gateway status", body: badGateway, noStatus: []string{"bad-gw"},
			reports: []string{"Gateway/bad-gw:StatusRemoved"}},
		{name: "bad VirtualService status", body: badVirtualSvc, noStatus: []string{"bad-vs"},
			reports: []string{"VirtualService/bad-vs:StatusRemoved"}},
		{name: "bad spec object left unchanged", body: badSpecRule, unchanged: true,
			reports: []string{"APIRule/bad-spec:Undecodable"}},
		{name: "good list", body: list("gateway.portico.dev/v1alpha1", "APIRuleList", goodRule, goodRule), unchanged: true},
		{name: "list with bad items",
			body:     list("gateway.portico.dev/v1alpha1", "APIRuleList", goodRule, badStatusRule, badSpecRule),
			items:    []string{"good", "bad-status"},
			noStatus: []string{"bad-status"},
			reports:  []string{"APIRule/bad-status:StatusRemoved", "APIRule/bad-spec:Dropped"}},
		{name: "Istio list with bad status",
			body:     list("networking.istio.io/v1", "GatewayList", goodGateway, badGateway),
			items:    []string{"good-gw", "bad-gw"},
			noStatus: []string{"bad-gw"},
			reports:  []string{"Gateway/bad-gw:StatusRemoved"}},
		{name: "built-in list, items without kind",
			body:    list("v1", "ServiceList", item(service("ok", `[{"port":80}]`)), item(service("broken", `"80"`))),
			items:   []string{"ok"},
			reports: []string{"Service/broken:Dropped"}},
		{name: "kind outside the scheme", body: `{"apiVersion":"batch/v1","kind":"Job","spec":{"parallelism":"x"}}`, unchanged: true},
		{name: "Table", body: `{"apiVersion":"meta.k8s.io/v1","kind":"Table","rows":[{"object":` + badSpecRule + `}]}`, unchanged: true},
		{name: "PartialObjectMetadataList", body: list("meta.k8s.io/v1", "PartialObjectMetadataList", `{"metadata":{"name":"x"}}`), unchanged: true},
		{name: "Status", body: `{"apiVersion":"v1","kind":"Status","status":"Failure","code":"x"}`, unchanged: true},
		{name: "not JSON", body: `not json`, unchanged: true},
	}
	f := newFilter(testScheme)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, reports := f.document([]byte(tc.body))
			if got := reasons(reports); fmt.Sprint(got) != fmt.Sprint(orEmpty(tc.reports)) {
				t.Errorf("reports %v, want %v", got, tc.reports)
			}
			if tc.unchanged {
				if string(out) != tc.body {
					t.Errorf("changed:\n%s\nwant\n%s", out, tc.body)
				}
				return
			}
			checkObjects(t, typedDecode(t, out), tc.items, tc.noStatus)
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// checkObjects checks the names of a list's items and which objects lost
// their status.
func checkObjects(t *testing.T, obj runtime.Object, items, noStatus []string) {
	t.Helper()
	var names []string
	status := map[string]bool{}
	visit := func(o runtime.Object) {
		switch o := o.(type) {
		case *porticov1alpha1.APIRule:
			names = append(names, o.Name)
			status[o.Name] = len(o.Status.Conditions) > 0
		case *networkingv1.Gateway:
			names = append(names, o.Name)
			status[o.Name] = o.Status.ObservedGeneration != 0
		case *networkingv1.VirtualService:
			names = append(names, o.Name)
			status[o.Name] = o.Status.ObservedGeneration != 0
		case *corev1.Service:
			names = append(names, o.Name)
			status[o.Name] = true
		default:
			t.Fatalf("unexpected %T", o)
		}
	}
	switch l := obj.(type) {
	case *porticov1alpha1.APIRuleList:
		for i := range l.Items {
			visit(&l.Items[i])
		}
	case *networkingv1.GatewayList:
		for _, o := range l.Items {
			visit(o)
		}
	case *corev1.ServiceList:
		for i := range l.Items {
			visit(&l.Items[i])
		}
	default:
		visit(l)
	}
	if items != nil && fmt.Sprint(names) != fmt.Sprint(items) {
		t.Errorf("items %v, want %v", names, items)
	}
	for name, has := range status {
		want := !contains(noStatus, name)
		if has != want {
			t.Errorf("%s has status %v, want %v", name, has, want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func frame(typ, obj string) string { return fmt.Sprintf(`{"type":%q,"object":%s}`, typ, obj) }

func TestEvent(t *testing.T) {
	bookmark := `{"apiVersion":"gateway.portico.dev/v1alpha1","kind":"APIRule","metadata":{"resourceVersion":"12",` +
		`"annotations":{"k8s.io/initial-events-end":"true"}}}`
	errorStatus := `{"apiVersion":"v1","kind":"Status","status":"Failure","message":"too old resource version","reason":"Expired","code":410}`
	cases := []struct {
		name      string
		frame     string
		unchanged bool
		dropped   bool
		wantType  string // of the frame passed on
		wantObj   func(t *testing.T, obj runtime.Object)
		reports   []string
	}{
		{name: "good ADDED", frame: frame("ADDED", goodRule), unchanged: true},
		{name: "good MODIFIED Istio", frame: frame("MODIFIED", goodGateway), unchanged: true},
		{name: "bad lastTransitionTime", frame: frame("ADDED", badStatusRule), wantType: "ADDED",
			wantObj: statusless("bad-status"), reports: []string{"APIRule/bad-status:StatusRemoved"}},
		{name: "bad Gateway status MODIFIED", frame: frame("MODIFIED", badGateway), wantType: "MODIFIED",
			wantObj: statusless("bad-gw"), reports: []string{"Gateway/bad-gw:StatusRemoved"}},
		{name: "bad VirtualService status", frame: frame("ADDED", badVirtualSvc), wantType: "ADDED",
			wantObj: statusless("bad-vs"), reports: []string{"VirtualService/bad-vs:StatusRemoved"}},
		{name: "bad spec ADDED is dropped", frame: frame("ADDED", badSpecRule), dropped: true,
			reports: []string{"APIRule/bad-spec:Dropped"}},
		{name: "bad spec MODIFIED becomes DELETED", frame: frame("MODIFIED", badSpecRule), wantType: "DELETED",
			wantObj: metadataOnly("bad-spec"), reports: []string{"APIRule/bad-spec:Dropped"}},
		{name: "bad spec DELETED is reduced", frame: frame("DELETED", badSpecRule), wantType: "DELETED",
			wantObj: metadataOnly("bad-spec"), reports: []string{"APIRule/bad-spec:Dropped"}},
		{name: "built-in bad spec MODIFIED", frame: frame("MODIFIED", service("broken", `"80"`)), wantType: "DELETED",
			wantObj: func(t *testing.T, obj runtime.Object) {
				if s := obj.(*corev1.Service); s.Name != "broken" || s.UID != "uid-broken" {
					t.Errorf("reduced to %+v", s.ObjectMeta)
				}
			}, reports: []string{"Service/broken:Dropped"}},
		{name: "BOOKMARK", frame: frame("BOOKMARK", bookmark), unchanged: true},
		{name: "BOOKMARK with an odd object", frame: frame("BOOKMARK", badSpecRule), unchanged: true},
		{name: "ERROR", frame: frame("ERROR", errorStatus), unchanged: true},
		{name: "kind outside the scheme", frame: frame("ADDED", `{"apiVersion":"batch/v1","kind":"Job","spec":{"parallelism":"x"}}`), unchanged: true},
		{name: "PartialObjectMetadata", frame: frame("MODIFIED", `{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{"name":"x","creationTimestamp":"bad"}}`), unchanged: true},
	}
	f := newFilter(testScheme)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, reports := f.event([]byte(tc.frame))
			if got := reasons(reports); fmt.Sprint(got) != fmt.Sprint(orEmpty(tc.reports)) {
				t.Errorf("reports %v, want %v", got, tc.reports)
			}
			switch {
			case tc.unchanged:
				if string(out) != tc.frame {
					t.Errorf("changed:\n%s\nwant\n%s", out, tc.frame)
				}
			case tc.dropped:
				if out != nil {
					t.Errorf("passed on %s", out)
				}
			default:
				var ev watchFrame
				if err := json.Unmarshal(out, &ev); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				if string(ev.Type) != tc.wantType {
					t.Errorf("type %s, want %s", ev.Type, tc.wantType)
				}
				tc.wantObj(t, typedDecode(t, ev.Object))
			}
		})
	}
}

func statusless(name string) func(t *testing.T, obj runtime.Object) {
	return func(t *testing.T, obj runtime.Object) {
		t.Helper()
		checkObjects(t, obj, []string{name}, []string{name})
	}
}

// metadataOnly checks an APIRule reduced to its metadata.
func metadataOnly(name string) func(t *testing.T, obj runtime.Object) {
	return func(t *testing.T, obj runtime.Object) {
		t.Helper()
		r, ok := obj.(*porticov1alpha1.APIRule)
		if !ok {
			t.Fatalf("got %T", obj)
		}
		if r.Name != name || r.Namespace != "team-a" || string(r.UID) != "uid-"+name || r.ResourceVersion != "7" || r.Labels["app"] != "x" {
			t.Errorf("metadata %+v", r.ObjectMeta)
		}
		if len(r.Spec.Hosts) != 0 || len(r.Status.Conditions) != 0 {
			t.Errorf("kept spec or status: %+v", r)
		}
	}
}
