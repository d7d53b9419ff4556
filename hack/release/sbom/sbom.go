package sbom

import (
	"bytes"
	"cmp"
	"crypto/sha1" // UUIDv5 is defined with SHA-1 (RFC 9562 §5.5); not used for security
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ArtifactType is the OCI artifact type (and layer media type) of a CycloneDX
// JSON SBOM.
const ArtifactType = "application/vnd.cyclonedx+json"

// Subject describes the binary an SBOM is for.
type Subject struct {
	Name     string      // image name, e.g. portico-operator
	Version  string      // release version, e.g. v0.1.0
	Platform v1.Platform // linux/amd64 …
	Created  time.Time   // the release's timestamp (SOURCE_DATE_EPOCH); never time.Now()
}

// Property names. The cdx:gomod ones are the official CycloneDX taxonomy
// (https://github.com/CycloneDX/cyclonedx-property-taxonomy/blob/main/cdx/gomod.md);
// the rest are Portico's own namespace.
const (
	propGoVersion     = "cdx:gomod:build:env:GOVERSION"
	propEnvPrefix     = "cdx:gomod:build:env:" // + GOOS, GOARCH, CGO_ENABLED
	propBuildTag      = "cdx:gomod:build:tag"
	propSettingPrefix = "portico:go:build:setting:" // + any other build setting key
	propPackage       = "portico:go:package"
	propModuleVersion = "portico:go:module:version"
	propPlatform      = "portico:image:platform"
	propSum           = "portico:go:module:sum"
	propReplaces      = "portico:go:module:replaces"
	propReplaceDir    = "portico:go:module:replace-dir"
)

const (
	cyclonedxGoModule = "github.com/CycloneDX/cyclonedx-go"
	develVersion      = "(devel)"
)

// FromBinary reads the build info of the Go binary at path and returns its
// CycloneDX JSON SBOM.
//
// The output depends only on the binary and s: the same inputs give the same
// bytes. s.Name, s.Version and s.Created are required. If s.Platform names an
// OS or architecture, it must match the GOOS/GOARCH the binary was built for.
func FromBinary(path string, s Subject) ([]byte, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading Go build info of %s: %w", path, err)
	}
	bom, err := newBOM(bi, s)
	if err != nil {
		return nil, fmt.Errorf("SBOM of %s: %w", path, err)
	}
	return encode(bom)
}

func (s Subject) validate() error {
	var errs []error
	if s.Name == "" {
		errs = append(errs, errors.New("subject name is empty"))
	}
	if s.Version == "" {
		errs = append(errs, errors.New("subject version is empty"))
	}
	if s.Created.IsZero() {
		errs = append(errs, errors.New("subject creation time is not set (use the release's SOURCE_DATE_EPOCH)"))
	}
	return errors.Join(errs...)
}

// newBOM turns build info into a BOM (without serial number).
func newBOM(bi *debug.BuildInfo, s Subject) (*cdx.BOM, error) {
	if bi.Main.Path == "" {
		return nil, fmt.Errorf("binary of package %q was not built in module mode (no main module)", bi.Path)
	}

	app, err := application(bi, s)
	if err != nil {
		return nil, err
	}

	// Modules, keyed by bom-ref. Two modules replaced by the same module
	// version are one component (bom-refs must be unique).
	byRef := map[string]*cdx.Component{}
	for _, m := range bi.Deps {
		c := module(m)
		if prev, ok := byRef[c.BOMRef]; ok {
			prev.Properties = sortedProperties(slices.Concat(deref(prev.Properties), deref(c.Properties)))
			continue
		}
		byRef[c.BOMRef] = &c
	}
	if std := stdlib(bi.GoVersion); std != nil {
		byRef[std.BOMRef] = std
	}

	components := make([]cdx.Component, 0, len(byRef))
	for _, c := range byRef {
		components = append(components, *c)
	}
	slices.SortFunc(components, func(a, b cdx.Component) int {
		return cmp.Or(
			strings.Compare(a.Name, b.Name),
			strings.Compare(a.Version, b.Version),
			strings.Compare(a.BOMRef, b.BOMRef),
		)
	})

	// Build info says which modules are linked into the binary, not which
	// module imports which: the only edges known are from the application to
	// each module (the flattened, transitive closure). Modules get no entries
	// of their own, which in CycloneDX means "dependencies unknown".
	refs := make([]string, 0, len(components))
	for _, c := range components {
		refs = append(refs, c.BOMRef)
	}
	dependencies := []cdx.Dependency{{Ref: app.BOMRef, Dependencies: &refs}}

	tools := generator()
	return &cdx.BOM{
		JSONSchema:  "http://cyclonedx.org/schema/bom-1.6.schema.json",
		BOMFormat:   cdx.BOMFormat,
		SpecVersion: cdx.SpecVersion1_6,
		Version:     1,
		Metadata: &cdx.Metadata{
			Timestamp:  s.Created.UTC().Format(time.RFC3339),
			Lifecycles: &[]cdx.Lifecycle{{Phase: cdx.LifecyclePhasePostBuild}},
			Tools:      &cdx.ToolsChoice{Components: &tools},
			Component:  app,
		},
		Components:   &components,
		Dependencies: &dependencies,
	}, nil
}

// application is metadata.component: the binary itself.
func application(bi *debug.BuildInfo, s Subject) (*cdx.Component, error) {
	var props []cdx.Property
	add := func(name, value string) { props = append(props, cdx.Property{Name: name, Value: value}) }

	if bi.GoVersion != "" {
		add(propGoVersion, bi.GoVersion)
	}
	var goos, goarch string
	for _, st := range bi.Settings {
		switch st.Key {
		case "GOOS", "GOARCH", "CGO_ENABLED":
			add(propEnvPrefix+st.Key, st.Value)
		case "-tags":
			for tag := range strings.SplitSeq(st.Value, ",") {
				if tag != "" {
					add(propBuildTag, tag)
				}
			}
		default:
			add(propSettingPrefix+st.Key, st.Value)
		}
		switch st.Key {
		case "GOOS":
			goos = st.Value
		case "GOARCH":
			goarch = st.Value
		}
	}
	if (s.Platform.OS != "" && goos != "" && s.Platform.OS != goos) ||
		(s.Platform.Architecture != "" && goarch != "" && s.Platform.Architecture != goarch) {
		return nil, fmt.Errorf("binary is built for %s/%s, not for the image platform %s", goos, goarch, s.Platform.String())
	}
	if s.Platform.OS != "" || s.Platform.Architecture != "" {
		add(propPlatform, s.Platform.String())
	}
	add(propPackage, bi.Path)
	if v := bi.Main.Version; v != "" && v != develVersion {
		add(propModuleVersion, v)
	}

	p := golangPURL(bi.Main.Path, s.Version)
	if sub, ok := strings.CutPrefix(bi.Path, bi.Main.Path+"/"); ok {
		p += "#" + escapeSegments(sub)
	}
	c := purlComponent(cdx.ComponentTypeApplication, s.Name, s.Version, p, props)
	return &c, nil
}

// purlComponent is a component that its package URL identifies.
func purlComponent(typ cdx.ComponentType, name, version, purl string, props []cdx.Property) cdx.Component {
	return cdx.Component{BOMRef: purl, Type: typ, Name: name, Version: version, PackageURL: purl, Properties: sortedProperties(props)}
}

// module is the component of one dependency module, or of its replacement.
func module(m *debug.Module) cdx.Component {
	modPath, modVersion, sum := m.Path, m.Version, m.Sum
	var props []cdx.Property
	if r := m.Replace; r != nil {
		if isLocalPath(r.Path) {
			return cdx.Component{
				BOMRef:     "gomod-local:" + m.Path,
				Type:       cdx.ComponentTypeLibrary,
				Name:       m.Path,
				Properties: sortedProperties([]cdx.Property{{Name: propReplaceDir, Value: r.Path}}),
			}
		}
		replaces := m.Path
		if m.Version != "" {
			replaces += "@" + m.Version
		}
		props = append(props, cdx.Property{Name: propReplaces, Value: replaces})
		modPath, modVersion, sum = r.Path, r.Version, r.Sum
	}
	if sum != "" {
		props = append(props, cdx.Property{Name: propSum, Value: sum})
	}
	return purlComponent(cdx.ComponentTypeLibrary, modPath, modVersion, golangPURL(modPath, modVersion), props)
}

// stdlib is the component of the Go standard library compiled into the
// binary, named and versioned the way syft does (name "stdlib", purl version
// without the "go" prefix), which is what vulnerability scanners match on.
func stdlib(goVersion string) *cdx.Component {
	// "go1.26.8", "go1.26.8 X:boringcrypto" or "devel go1.27-0123abcd …".
	f := strings.Fields(goVersion)
	if len(f) > 1 && f[0] == "devel" {
		f = f[1:]
	}
	if len(f) == 0 {
		return nil
	}
	c := purlComponent(cdx.ComponentTypeLibrary, "stdlib", f[0], golangPURL("stdlib", strings.TrimPrefix(f[0], "go")), nil)
	return &c
}

// generator is metadata.tools.components: what made the SBOM.
var generator = sync.OnceValue(func() []cdx.Component {
	lib := cdx.Component{
		Type:  cdx.ComponentTypeLibrary,
		Group: "CycloneDX",
		Name:  "cyclonedx-go",
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path != cyclonedxGoModule {
				continue
			}
			if m.Replace != nil && !isLocalPath(m.Replace.Path) {
				m = m.Replace
			}
			if m.Version != "" && !isLocalPath(m.Path) {
				lib.Version = m.Version
				lib.PackageURL = golangPURL(m.Path, m.Version)
			}
		}
	}
	return []cdx.Component{
		{
			Type:        cdx.ComponentTypeApplication,
			Group:       "portico-dev",
			Name:        "portico-release",
			Description: "Portico release tooling (github.com/portico-dev/portico/hack/release/sbom)",
		},
		lib,
	}
})

func deref(p *[]cdx.Property) []cdx.Property {
	if p == nil {
		return nil
	}
	return *p
}

func sortedProperties(props []cdx.Property) *[]cdx.Property {
	if len(props) == 0 {
		return nil
	}
	props = slices.Clone(props)
	slices.SortStableFunc(props, func(a, b cdx.Property) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Value, b.Value))
	})
	props = slices.Compact(props)
	return &props
}

// encode writes bom as indented JSON, with a serialNumber derived from the
// rest of the document.
func encode(bom *cdx.BOM) ([]byte, error) {
	bom.SerialNumber = ""
	unsigned, err := encodeJSON(bom)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(unsigned)
	bom.SerialNumber = "urn:uuid:" + uuidV5(serialNamespace, hex.EncodeToString(sum[:]))
	return encodeJSON(bom)
}

func encodeJSON(bom *cdx.BOM) ([]byte, error) {
	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(bom); err != nil {
		return nil, fmt.Errorf("encoding CycloneDX JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// namespaceURL is the RFC 9562 name space ID for URLs.
var namespaceURL = [16]byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// serialNamespace is the name space of SBOM serial numbers: UUIDv5 of this
// package's URL in the URL name space.
var serialNamespace = uuidBytes(namespaceURL, "https://github.com/portico-dev/portico/hack/release/sbom")

// uuidV5 is the name-based (SHA-1) UUID of name in namespace, RFC 9562 §5.5.
func uuidV5(namespace [16]byte, name string) string {
	u := uuidBytes(namespace, name)
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func uuidBytes(namespace [16]byte, name string) [16]byte {
	h := sha1.New()
	h.Write(namespace[:])
	h.Write([]byte(name))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	return u
}

// golangPURL is pkg:golang/<module path>@<version> as the purl spec's golang
// type defines it: each path segment and the version percent-encoded.
func golangPURL(path, version string) string {
	p := "pkg:golang/" + escapeSegments(path)
	if version != "" {
		p += "@" + purlEscape(version)
	}
	return p
}

func escapeSegments(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = purlEscape(s)
	}
	return strings.Join(segs, "/")
}

// purlEscape percent-encodes everything but the purl spec's unreserved
// characters (ALPHA / DIGIT / "." / "-" / "_" / "~").
func purlEscape(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '-', c == '_', c == '~':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		}
	}
	return b.String()
}

// isLocalPath reports whether a replacement is a directory rather than a
// module path (the rule of golang.org/x/mod/modfile.IsDirectoryPath).
func isLocalPath(p string) bool {
	return p == "." || p == ".." ||
		strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") ||
		strings.HasPrefix(p, `.\`) || strings.HasPrefix(p, `..\`) ||
		strings.HasPrefix(p, "/") || filepath.IsAbs(p) ||
		len(p) >= 2 && p[1] == ':' // Windows drive letter
}
