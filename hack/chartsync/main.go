// Command chartsync copies what controller-gen writes into config/ into the
// Helm chart, so the chart never carries a hand-edited CRD or RBAC rule:
//
//   - every config/crd/bases/*.yaml becomes templates/crds/<same name>, the
//     CRD verbatim below a metadata block that adds the chart's labels and,
//     with crds.keep, the helm.sh/resource-policy: keep annotation; the whole
//     object renders only with crds.install;
//   - config/rbac/operator/role.yaml, every config/rbac/*-controller/role.yaml
//     and config/rbac/portico-ratelimit-service/role.yaml (the rate-limit
//     service's) become files/rbac/<dir>.yaml, the ClusterRole and Role rules the chart's
//     RBAC templates read. controller-gen pins the Role to portico-system; the
//     chart puts it in the release namespace instead. The operator may also
//     have a Role in namespace default (to read the API server's
//     EndpointSlice, Service default/kubernetes's), which stays there; a
//     controller's Role there, or a Role in any other namespace, is an error.
//
// chartsync owns templates/crds and files/rbac: it removes files there that
// config/ no longer produces and leaves everything else in the chart alone.
// Its output depends only on config/, so running it twice changes nothing.
//
//	go run ./hack/chartsync --config config --chart charts/portico
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/globallimit"
	"github.com/portico-dev/portico/internal/manifest"
)

// generatedNamespace is the namespace the kubebuilder RBAC markers name; the
// chart replaces it with the release namespace.
const generatedNamespace = "portico-system"

// apiServerNamespace holds Service kubernetes, whose EndpointSlice is the API
// server's addresses: the one namespace besides its own the operator reads.
const apiServerNamespace = "default"

// Chart directories chartsync owns.
const (
	crdTemplateDir = "templates/crds"
	rbacFileDir    = "files/rbac"
)

func main() {
	configDir := flag.String("config", "config", "directory controller-gen writes CRDs (crd/bases) and RBAC (rbac/<binary>) into")
	chartDir := flag.String("chart", "charts/portico", "chart to update")
	flag.Parse()

	files, err := render(os.DirFS(*configDir))
	if err == nil {
		err = write(*chartDir, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartsync:", err)
		os.Exit(1)
	}
}

// origin names config/ in errors and in the headers of generated files,
// the same whatever --config is, so the output does not depend on where the
// repository is checked out.
const origin = "config"

// render returns the chart files generated from config, keyed by their path
// in the chart.
func render(config fs.FS) (map[string][]byte, error) {
	sources, err := sourcesOf(config)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, target := range slices.Sorted(maps.Keys(sources)) {
		p := sources[target]
		raw, err := fs.ReadFile(config, p)
		if err != nil {
			return nil, err
		}
		binary := strings.TrimSuffix(path.Base(target), ".yaml")
		generate := func(raw []byte, source string) ([]byte, error) {
			return rbacRules(raw, source, binary == "operator")
		}
		if path.Dir(target) == crdTemplateDir {
			generate = crdTemplate
		}
		if out[target], err = generate(raw, origin+"/"+p); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", origin, p, err)
		}
	}
	return out, nil
}

// sourcesOf maps every chart file chartsync generates to the file of config
// it is generated from: each CRD, and the role.yaml of each binary.
func sourcesOf(config fs.FS) (map[string]string, error) {
	crds, err := fs.Glob(config, "crd/bases/*.yaml")
	if err != nil {
		return nil, err
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRDs in %s/crd/bases: run controller-gen first", origin)
	}
	roles, err := fs.Glob(config, "rbac/*/role.yaml")
	if err != nil {
		return nil, err
	}
	sources := map[string]string{}
	for _, p := range crds {
		sources[crdTemplateDir+"/"+path.Base(p)] = p
	}
	for _, p := range roles {
		binary := path.Base(path.Dir(p))
		if binary == "operator" || strings.HasSuffix(binary, "-controller") || binary == globallimit.ServiceName { // else not a Portico binary's RBAC
			sources[rbacFileDir+"/"+binary+".yaml"] = p
		}
	}
	if _, ok := sources[rbacFileDir+"/operator.yaml"]; !ok {
		return nil, fmt.Errorf("no %s/rbac/operator/role.yaml: run controller-gen first", origin)
	}
	return sources, nil
}

// crdTemplate wraps one controller-gen CRD in the chart's conditionals.
func crdTemplate(raw []byte, source string) ([]byte, error) {
	var crd struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            map[string]any    `json:"spec"`
		Status          map[string]any    `json:"status"`
	}
	docs, err := manifest.Documents(raw)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("want one CRD per file, got %d YAML documents", len(docs))
	}
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		return nil, fmt.Errorf("parse CRD: %w", err)
	}
	if crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" {
		return nil, fmt.Errorf("want one apiextensions.k8s.io/v1 CustomResourceDefinition, got %s %s", crd.APIVersion, crd.Kind)
	}
	if crd.Metadata.Name == "" || len(crd.Spec) == 0 || len(crd.Status) > 0 {
		return nil, errors.New("want a CRD with a name, a spec and no status")
	}
	// The spec is copied as text, so the chart's CRD is byte for byte the
	// one in config/. controller-gen sorts keys, so spec is the last one.
	_, spec, ok := bytes.Cut(raw, []byte("\nspec:\n"))
	if !ok {
		return nil, errors.New("want a top-level spec key, as controller-gen writes it")
	}
	for _, line := range bytes.Split(spec, []byte("\n")) {
		if len(line) > 0 && line[0] != ' ' {
			return nil, fmt.Errorf("want spec as the last top-level key, as controller-gen writes it; found %q after it", line)
		}
	}

	var b bytes.Buffer
	fmt.Fprintf(&b, "{{- /* Code generated by hack/chartsync from %s. DO NOT EDIT. */}}\n", source)
	b.WriteString("{{- if .Values.crds.install }}\n")
	b.WriteString("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n")
	fmt.Fprintf(&b, "  name: %s\n", crd.Metadata.Name)
	b.WriteString("  annotations:\n")
	b.WriteString("    {{- if .Values.crds.keep }}\n")
	b.WriteString("    helm.sh/resource-policy: keep\n")
	b.WriteString("    {{- end }}\n")
	if err := writeMap(&b, crd.Metadata.Annotations, "    "); err != nil {
		return nil, err
	}
	b.WriteString("  labels:\n")
	b.WriteString("    {{- include \"portico.labels\" . | nindent 4 }}\n")
	if err := writeMap(&b, crd.Metadata.Labels, "    "); err != nil {
		return nil, err
	}
	b.WriteString("spec:\n")
	// Descriptions are Go doc comments; one that shows a template must stay
	// text. Only "{{" opens an action, so it is the only thing to escape.
	b.Write(bytes.ReplaceAll(spec, []byte("{{"), []byte(`{{ "{{" }}`)))
	if !bytes.HasSuffix(spec, []byte("\n")) {
		b.WriteString("\n")
	}
	b.WriteString("{{- end }}\n")
	return b.Bytes(), nil
}

// writeMap writes a string map as YAML lines with the given indent.
func writeMap(b *bytes.Buffer, m map[string]string, indent string) error {
	if len(m) == 0 {
		return nil
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(strings.TrimSuffix(string(out), "\n"), "\n") {
		b.WriteString(indent + line)
	}
	b.WriteString("\n")
	return nil
}

// Rules is the content of files/rbac/<binary>.yaml: what the chart binds to
// the binary's ServiceAccount.
type Rules struct {
	// Name of the ClusterRole and the Role.
	Name string `json:"name"`
	// ClusterRules are the rules of the ClusterRole.
	ClusterRules []rbacv1.PolicyRule `json:"clusterRules,omitempty"`
	// NamespacedRules are the rules of the Role in the release namespace.
	NamespacedRules []rbacv1.PolicyRule `json:"namespacedRules,omitempty"`
	// DefaultNamespaceRules are the rules of the operator's Role in
	// namespace default, which the chart leaves there.
	DefaultNamespaceRules []rbacv1.PolicyRule `json:"defaultNamespaceRules,omitempty"`
}

// rbacRules reads controller-gen's role.yaml (a ClusterRole, a Role in
// portico-system, or both, of the same name; with allowDefault also a Role in
// namespace default) into Rules.
func rbacRules(raw []byte, source string, allowDefault bool) ([]byte, error) {
	docs, err := manifest.Documents(raw)
	if err != nil {
		return nil, err
	}
	var rules Rules
	var seenCluster bool
	rolesSeen := map[string]bool{} // by namespace
	for _, doc := range docs {
		var obj struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta   `json:"metadata"`
			Rules           []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.UnmarshalStrict(doc, &obj); err != nil {
			return nil, fmt.Errorf("parse RBAC: %w", err)
		}
		if obj.APIVersion != rbacv1.SchemeGroupVersion.String() {
			return nil, fmt.Errorf("%s %q: want apiVersion %s", obj.Kind, obj.Metadata.Name, rbacv1.SchemeGroupVersion)
		}
		if rules.Name != "" && obj.Metadata.Name != rules.Name {
			return nil, fmt.Errorf("%s %q: want the name %q of the other role", obj.Kind, obj.Metadata.Name, rules.Name)
		}
		rules.Name = obj.Metadata.Name
		switch obj.Kind {
		case "ClusterRole":
			if seenCluster {
				return nil, fmt.Errorf("more than one ClusterRole")
			}
			seenCluster = true
			rules.ClusterRules = obj.Rules
		case "Role":
			target, err := roleTarget(&rules, obj.Metadata, allowDefault)
			if err != nil {
				return nil, err
			}
			if rolesSeen[obj.Metadata.Namespace] {
				return nil, fmt.Errorf("more than one Role in namespace %q", obj.Metadata.Namespace)
			}
			rolesSeen[obj.Metadata.Namespace] = true
			*target = obj.Rules
		default:
			return nil, fmt.Errorf("unexpected %s %q", obj.Kind, obj.Metadata.Name)
		}
	}
	if !seenCluster && len(rolesSeen) == 0 {
		return nil, errors.New("no ClusterRole or Role")
	}
	out, err := yaml.Marshal(rules)
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# Code generated by hack/chartsync from %s. DO NOT EDIT.\n", source)
	return append([]byte(header), out...), nil
}

// roleTarget returns where in rules the rules of a Role in its namespace go:
// portico-system becomes the release namespace; default stays default, and
// only the operator (allowDefault) may have a Role there.
func roleTarget(rules *Rules, role metav1.ObjectMeta, allowDefault bool) (*[]rbacv1.PolicyRule, error) {
	switch {
	case role.Namespace == generatedNamespace:
		return &rules.NamespacedRules, nil
	case role.Namespace == apiServerNamespace && allowDefault:
		return &rules.DefaultNamespaceRules, nil
	case role.Namespace == apiServerNamespace:
		return nil, fmt.Errorf("the Role %q is in namespace %q; only the operator may have a Role there (to read the API server's EndpointSlice)",
			role.Name, role.Namespace)
	default:
		return nil, fmt.Errorf("the Role %q is in namespace %q; the RBAC markers must use namespace=%s, which the chart replaces with the release namespace, or namespace=%s for the operator",
			role.Name, role.Namespace, generatedNamespace, apiServerNamespace)
	}
}

// write makes the owned directories of chart hold exactly files, touching
// only what differs.
func write(chart string, files map[string][]byte) error {
	if _, err := os.Stat(filepath.Join(chart, "Chart.yaml")); err != nil {
		return fmt.Errorf("%s is not a chart: %w", chart, err)
	}
	return manifest.WriteTree(chart, []string{crdTemplateDir, rbacFileDir}, files, func(format string, args ...any) {
		fmt.Printf("chartsync: "+format+"\n", args...)
	})
}
