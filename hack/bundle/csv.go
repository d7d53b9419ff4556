package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The ClusterServiceVersion (operators.coreos.com/v1alpha1), as far as the
// bundle fills it in. These mirror operator-framework's types field for
// field (JSON names); the tests check the result against OLM's CRD on a
// real API server, and internal/olm runs operator-framework's validators
// on bundle/.

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
	DisplayName               string         `json:"displayName"`
	Description               string         `json:"description,omitempty"`
	Version                   string         `json:"version"`
	MinKubeVersion            string         `json:"minKubeVersion,omitempty"`
	Maturity                  string         `json:"maturity,omitempty"`
	Provider                  provider       `json:"provider"`
	Keywords                  []string       `json:"keywords,omitempty"`
	Links                     []link         `json:"links,omitempty"`
	Maintainers               []maintainer   `json:"maintainers,omitempty"`
	Icon                      []icon         `json:"icon,omitempty"`
	InstallModes              []installMode  `json:"installModes"`
	CustomResourceDefinitions crdDefinitions `json:"customresourcedefinitions"`
	Install                   install        `json:"install"`
	RelatedImages             []relatedImage `json:"relatedImages,omitempty"`
}

type provider struct {
	Name string `json:"name"`
	URL  string `json:"url,omitempty"`
}

type link struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

type maintainer struct {
	Name  string `json:"name"`
	Email string `json:"email,omitempty"`
}

type icon struct {
	Data      []byte `json:"base64data"`
	MediaType string `json:"mediatype"`
}

// portico.svg is the icon OLM's consoles show for the package.
//
//go:embed portico.svg
var iconSVG []byte

type installMode struct {
	Type      string `json:"type"`
	Supported bool   `json:"supported"`
}

type crdDefinitions struct {
	Owned []ownedCRD `json:"owned"`
}

type ownedCRD struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Kind        string `json:"kind"`
	DisplayName string `json:"displayName,omitempty"`
	Description string `json:"description,omitempty"`
}

type install struct {
	Strategy string      `json:"strategy"`
	Spec     installSpec `json:"spec"`
}

type installSpec struct {
	ClusterPermissions []permission `json:"clusterPermissions,omitempty"`
	Permissions        []permission `json:"permissions,omitempty"`
	Deployments        []deployment `json:"deployments"`
}

type permission struct {
	ServiceAccountName string              `json:"serviceAccountName"`
	Rules              []rbacv1.PolicyRule `json:"rules"`
}

// deployment is the CSV's StrategyDeploymentSpec. Spec is the chart's
// rendering, kept as rendered (no zero-valued fields added by Go types).
type deployment struct {
	Name  string            `json:"name"`
	Label map[string]string `json:"label,omitempty"`
	Spec  map[string]any    `json:"spec"`
}

type relatedImage struct {
	Name  string `json:"name"`
	Image string `json:"image"`
}

// installModes: the operator ignores the OperatorGroup's target namespaces.
// It always works on the cluster-scoped APIGateway and the CRDs, runs every
// controller Deployment in its own namespace (POD_NAMESPACE), and the
// controllers reconcile APIRules and RateLimits in every namespace through
// their ClusterRoles. So:
//   - OwnNamespace: yes, and least privilege: the permissions (Deployments,
//     pods, Leases) become Roles in the operator's namespace only.
//   - AllNamespaces: no. It is what the operator does anyway, but OLM would
//     then grant the namespaced permissions cluster-wide, breaking the
//     contract's least privilege.
//   - SingleNamespace, MultiNamespace: no; OLM would put the Roles into the
//     target namespaces instead of the operator's own, where it needs them.
var installModes = []installMode{
	{Type: "OwnNamespace", Supported: true},
	{Type: "SingleNamespace", Supported: false},
	{Type: "MultiNamespace", Supported: false},
	{Type: "AllNamespaces", Supported: false},
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
OperatorGroup targets. Install it with an OwnNamespace OperatorGroup: its
namespaced permissions stay in that namespace (least privilege).

## Images

The operator passes every controller's image to its Deployment; each is a
RELATED_IMAGE_* variable of the operator and listed in relatedImages, so
tools that pin relatedImages to digests or mirror them cover the
controllers too. An APIGateway's ` + "`spec.controllers[].image`" + ` overrides them.
`

// clusterServiceVersion assembles the CSV.
func clusterServiceVersion(name, bundleVersion string, o options, chrt *chart.Chart, controllers []string, crds []crd, examples []map[string]any, m *manifests) clusterServiceVersionObject {
	binaries := make([]string, 0, len(controllers))
	for _, c := range controllers {
		binaries = append(binaries, controllerBinary(c))
	}
	img := images{registry: o.registry, tag: o.imageTag, digests: o.digests}

	csv := clusterServiceVersionObject{
		APIVersion: "operators.coreos.com/v1alpha1",
		Kind:       "ClusterServiceVersion",
		Metadata: csvMetadata{
			Name: name,
			Annotations: map[string]string{
				"alm-examples":   almExamples(examples),
				"capabilities":   "Basic Install",
				"categories":     "Networking",
				"containerImage": img.operator(),
				"description":    shortDescription,
				"repository":     chrt.Metadata.Home,
				"operatorframework.io/suggested-namespace": o.namespace,
			},
			// The images are built for these platforms (make docker-buildx).
			Labels: map[string]string{
				"operatorframework.io/arch.amd64": "supported",
				"operatorframework.io/arch.arm64": "supported",
				"operatorframework.io/os.linux":   "supported",
			},
		},
		Spec: csvSpec{
			DisplayName:    "Portico",
			Description:    fmt.Sprintf(description, "`"+strings.Join(binaries, "`, `")+"`", o.namespace),
			Version:        bundleVersion,
			MinKubeVersion: minKubeVersion,
			Maturity:       "alpha",
			Provider:       provider{Name: "Portico", URL: chrt.Metadata.Home},
			Keywords:       chrt.Metadata.Keywords,
			Links:          links(chrt.Metadata),
			Maintainers:    maintainers(chrt.Metadata),
			Icon:           []icon{{Data: iconSVG, MediaType: "image/svg+xml"}},
			InstallModes:   installModes,
			Install: install{
				Strategy: "deployment",
				Spec: installSpec{
					ClusterPermissions: m.clusterPermissions,
					Permissions:        m.permissions,
					Deployments:        []deployment{m.deployment},
				},
			},
			RelatedImages: m.relatedImages,
		},
	}
	for _, c := range crds {
		for _, v := range c.Spec.Versions {
			if !v.Served {
				continue
			}
			owned := ownedCRD{Name: c.Name, Version: v.Name, Kind: c.Spec.Names.Kind, DisplayName: displayName(c.Spec.Names.Kind)}
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				owned.Description = oneLine(v.Schema.OpenAPIV3Schema.Description)
			}
			csv.Spec.CustomResourceDefinitions.Owned = append(csv.Spec.CustomResourceDefinitions.Owned, owned)
		}
	}
	return csv
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
func links(md *chart.Metadata) []link {
	var out []link
	seen := map[string]bool{}
	add := func(name, url string) {
		if url != "" && !seen[url] {
			seen[url] = true
			out = append(out, link{Name: name, URL: url})
		}
	}
	for _, s := range md.Sources {
		add("Source Code", s)
	}
	add("Homepage", md.Home)
	return out
}

// maintainers are the chart's, else the project.
func maintainers(md *chart.Metadata) []maintainer {
	var out []maintainer
	for _, m := range md.Maintainers {
		out = append(out, maintainer{Name: m.Name, Email: m.Email})
	}
	if len(out) == 0 {
		out = []maintainer{{Name: "Portico maintainers", Email: "maintainers@portico.dev"}}
	}
	return out
}
