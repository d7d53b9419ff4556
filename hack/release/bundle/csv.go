package bundle

import (
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"helm.sh/helm/v3/pkg/chart"
)

// The ClusterServiceVersion (operators.coreos.com/v1alpha1), as far as the
// bundle fills it in: operator-framework's own types where they encode
// just what the bundle sets, these where they would add zero values (the
// object's metadata and status, the typed Deployment spec). The tests check
// the result against OLM's CRD on a real API server, and hack/release/olm runs
// operator-framework's validators on bundle/.

type clusterServiceVersionObject struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   csvMetadata `json:"metadata"`
	Spec       csvSpec     `json:"spec"`
}

type csvMetadata struct {
	Name        string            `json:"name"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

type csvSpec struct {
	DisplayName               string                             `json:"displayName"`
	Description               string                             `json:"description,omitempty"`
	Version                   string                             `json:"version"`
	MinKubeVersion            string                             `json:"minKubeVersion,omitempty"`
	Maturity                  string                             `json:"maturity,omitempty"`
	Provider                  v1alpha1.AppLink                   `json:"provider"`
	Keywords                  []string                           `json:"keywords,omitempty"`
	Links                     []v1alpha1.AppLink                 `json:"links,omitempty"`
	Maintainers               []v1alpha1.Maintainer              `json:"maintainers,omitempty"`
	Icon                      []v1alpha1.Icon                    `json:"icon,omitempty"`
	InstallModes              []v1alpha1.InstallMode             `json:"installModes"`
	CustomResourceDefinitions v1alpha1.CustomResourceDefinitions `json:"customresourcedefinitions"`
	Install                   install                            `json:"install"`
	RelatedImages             []v1alpha1.RelatedImage            `json:"relatedImages,omitempty"`
}

// portico.svg is the icon OLM's consoles show for the package.
//
//go:embed portico.svg
var iconSVG []byte

type install struct {
	Strategy string      `json:"strategy"`
	Spec     installSpec `json:"spec"`
}

// installSpec has no permissions: the namespaced rules are Roles of the
// bundle (installModes).
type installSpec struct {
	ClusterPermissions []v1alpha1.StrategyDeploymentPermissions `json:"clusterPermissions"`
	Deployments        []deployment                             `json:"deployments"`
}

// deployment is the CSV's StrategyDeploymentSpec. Spec is the chart's
// rendering, kept as rendered (no zero-valued fields added by Go types).
type deployment struct {
	Name  string            `json:"name"`
	Label map[string]string `json:"label,omitempty"`
	Spec  map[string]any    `json:"spec"`
}

// installModes: the operator ignores the OperatorGroup's target namespaces
// (and OLM's olm.targetNamespaces annotation). It always works on the
// cluster-scoped APIGateway and the CRDs, runs every controller Deployment
// in its own namespace (POD_NAMESPACE), and the controllers reconcile
// APIRules and RateLimits in every namespace through their ClusterRoles.
// So:
//   - OwnNamespace: yes (OLM v0's usual install).
//   - AllNamespaces: yes. It is what the operator does anyway, and the one
//     mode operator-controller v1.2.0 (OLM v1) installs registry+v1
//     bundles in. In this mode both OLMs turn a CSV's namespaced
//     permissions into cluster-wide ones; the CSV has none: the operator's
//     and the controllers' namespaced rules are Roles of the bundle, which
//     both OLMs create in the install namespace in every mode
//     (fromManifests).
//   - SingleNamespace, MultiNamespace: no; they would say the operator
//     watches namespaces it does not choose.
var installModes = []v1alpha1.InstallMode{
	{Type: v1alpha1.InstallModeTypeOwnNamespace, Supported: true},
	{Type: v1alpha1.InstallModeTypeSingleNamespace, Supported: false},
	{Type: v1alpha1.InstallModeTypeMultiNamespace, Supported: false},
	{Type: v1alpha1.InstallModeTypeAllNamespaces, Supported: true},
}

// shortDescription is the CSV's description annotation (one line in
// catalogs).
const shortDescription = "API-gateway module for Kubernetes: runs each gateway controller (APIRule, RateLimit) only while the CRDs it needs are installed."

// description is the CSV's spec.description (Markdown); %s are the
// controllers' binaries and the namespace.
const description = `Portico is an API-gateway module for Kubernetes. The portico-operator reads
the cluster's one ` + "`APIGateway`" + ` (named ` + "`default`" + `) and runs each gateway
controller as its own Deployment with its own image, but only while the
CRDs that controller needs (Istio's among them) are installed and
established. A controller starts as soon as its CRDs appear and is stopped
when one goes away; the APIGateway's status shows every controller's phase
and names what is missing.

Controllers: %s.

## Getting started

Install Istio's CRDs, then create the APIGateway:

` + "```yaml" + `
apiVersion: operator.portico.dev/v1alpha1
kind: APIGateway
metadata:
  name: default
spec: {}
` + "```" + `

and watch ` + "`kubectl get apigateway default`" + `. Every controller of the catalog is
enabled by default; ` + "`spec.controllers`" + ` disables one, scales it or overrides its
image, resources and scheduling (` + "`kubectl explain apigateway.spec`" + `).

## Install modes

The operator runs the controller Deployments in its own namespace
(suggested: %s) and watches the cluster-scoped APIGateway whatever the
OperatorGroup targets. OwnNamespace and AllNamespaces OperatorGroups give
the same install, and so does OLM v1 (a ClusterExtension): the namespaced
permissions are Roles of the bundle, created in the install namespace only
(least privilege), never cluster-wide rules.

## Network policy and dashboard

The operator writes its own NetworkPolicy (` + "`--own-network-policy`" + `: out only to
the API server and DNS, nothing in), owned by its Deployment, and one for
every controller it runs. To let Prometheus scrape it, add a NetworkPolicy
of your own that selects the operator's pods. The Grafana dashboard is the
chart's ` + "`files/monitoring/dashboard.json`" + `, in the chart archive attached to
every release.

## Images

The operator passes every controller's image to its Deployment; each is a
RELATED_IMAGE_* variable of the operator and listed in relatedImages, so
tools that pin relatedImages to digests or mirror them cover the
controllers too. An APIGateway's ` + "`spec.controllers[].image`" + ` overrides them.
`

// clusterServiceVersion assembles the CSV.
func clusterServiceVersion(name, bundleVersion string, o Options, in *inputs) clusterServiceVersionObject {
	binaries := make([]string, 0, len(in.controllers))
	for _, c := range in.controllers {
		binaries = append(binaries, controllerBinary(c))
	}
	img := images{registry: o.Registry, tag: o.ImageTag, digests: o.Digests}
	md, m := in.chart.Metadata, in.manifests
	return clusterServiceVersionObject{
		APIVersion: "operators.coreos.com/v1alpha1",
		Kind:       "ClusterServiceVersion",
		Metadata: csvMetadata{
			Name: name,
			Annotations: map[string]string{
				"alm-examples":   almExamples(in.examples),
				"capabilities":   "Basic Install",
				"categories":     "Networking",
				"containerImage": img.operator(),
				"description":    shortDescription,
				"repository":     md.Home,
				"operatorframework.io/suggested-namespace": o.Namespace,
			},
			// The images are built for these platforms (make docker-buildx).
			Labels: map[string]string{
				"operatorframework.io/arch.amd64": "supported",
				"operatorframework.io/arch.arm64": "supported",
				"operatorframework.io/os.linux":   "supported",
			},
		},
		Spec: csvSpec{
			DisplayName:               "Portico",
			Description:               fmt.Sprintf(description, "`"+strings.Join(binaries, "`, `")+"`", o.Namespace),
			Version:                   bundleVersion,
			MinKubeVersion:            minKubeVersion,
			Maturity:                  "alpha",
			Provider:                  v1alpha1.AppLink{Name: "Portico", URL: md.Home},
			Keywords:                  md.Keywords,
			Links:                     links(md),
			Maintainers:               maintainers(md),
			Icon:                      []v1alpha1.Icon{{Data: base64.StdEncoding.EncodeToString(iconSVG), MediaType: "image/svg+xml"}},
			InstallModes:              installModes,
			CustomResourceDefinitions: v1alpha1.CustomResourceDefinitions{Owned: ownedCRDs(in.crds)},
			Install: install{
				Strategy: "deployment",
				Spec: installSpec{
					ClusterPermissions: m.clusterPermissions,
					Deployments:        []deployment{m.deployment},
				},
			},
			RelatedImages: m.relatedImages,
		},
	}
}

// ownedCRDs are every served version of the CRDs.
func ownedCRDs(crds []crd) []v1alpha1.CRDDescription {
	var owned []v1alpha1.CRDDescription
	for _, c := range crds {
		for _, v := range c.Spec.Versions {
			if !v.Served {
				continue
			}
			o := v1alpha1.CRDDescription{Name: c.Name, Version: v.Name, Kind: c.Spec.Names.Kind, DisplayName: displayName(c.Spec.Names.Kind)}
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				o.Description = oneLine(v.Schema.OpenAPIV3Schema.Description)
			}
			owned = append(owned, o)
		}
	}
	return owned
}

// almExamples is the alm-examples annotation: the samples as a JSON array
// (keys sorted, so stable).
func almExamples(examples []map[string]any) string {
	if examples == nil {
		examples = []map[string]any{}
	}
	raw, err := json.MarshalIndent(examples, "", "  ")
	if err != nil {
		panic(err) // maps parsed from YAML always encode
	}
	return string(raw)
}

// links are the chart's home and sources, once each.
func links(md *chart.Metadata) []v1alpha1.AppLink {
	var out []v1alpha1.AppLink
	seen := map[string]bool{}
	add := func(name, url string) {
		if url != "" && !seen[url] {
			seen[url] = true
			out = append(out, v1alpha1.AppLink{Name: name, URL: url})
		}
	}
	for _, s := range md.Sources {
		add("Source Code", s)
	}
	add("Homepage", md.Home)
	return out
}

// maintainers are the chart's, else the project.
func maintainers(md *chart.Metadata) []v1alpha1.Maintainer {
	var out []v1alpha1.Maintainer
	for _, m := range md.Maintainers {
		out = append(out, v1alpha1.Maintainer{Name: m.Name, Email: m.Email})
	}
	if len(out) == 0 {
		out = []v1alpha1.Maintainer{{Name: "Portico maintainers", Email: "maintainers@portico.dev"}}
	}
	return out
}
