package olm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portico-dev/portico/test/testenv"
)

// TestBundleValidates runs operator-framework's validators on the
// checked-in bundle/ (what `make bundle` generates): no errors, and every
// warning is printed so a new one shows in the test output.
func TestBundleValidates(t *testing.T) {
	r, err := ValidateBundle(filepath.Join(testenv.RepoRoot(), "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range r.Warnings {
		t.Logf("warning: %s", w)
	}
	t.Logf("%d errors, %d warnings", len(r.Errors), len(r.Warnings))
	for _, e := range r.Errors {
		t.Errorf("error: %s", e)
	}
}

// TestValidateBundleReportsErrors shows the validators see what is wrong
// with a bundle: each broken copy of bundle/ must fail with the named
// problem.
func TestValidateBundleReportsErrors(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(csv string) string
		wantErr string
	}{
		{
			name: "no install modes",
			edit: func(csv string) string {
				return strings.Replace(csv, "  installModes:\n", "  installModes: []\n  _installModes:\n", 1)
			},
			wantErr: "install modes not found",
		},
		{
			name: "alm-examples is not JSON",
			edit: func(csv string) string {
				return strings.Replace(csv, "alm-examples: |-\n      [", "alm-examples: |-\n      [[", 1)
			},
			wantErr: "invalid example",
		},
		{
			name: "unknown capability level",
			edit: func(csv string) string {
				return strings.Replace(csv, "capabilities: Basic Install", "capabilities: Everything", 1)
			},
			wantErr: "capabilities",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyBundle(t)
			path := filepath.Join(dir, "manifests", "portico.clusterserviceversion.yaml")
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			edited := tc.edit(string(raw))
			if edited == string(raw) {
				t.Fatal("the edit did not change the CSV")
			}
			if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := ValidateBundle(dir)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range r.Errors {
				found = found || strings.Contains(e, tc.wantErr)
			}
			if !found {
				t.Errorf("want an error about %q, got errors %q", tc.wantErr, r.Errors)
			}
		})
	}
}

// copyBundle copies bundle/ into a temporary directory.
func copyBundle(t *testing.T) string {
	t.Helper()
	src := filepath.Join(testenv.RepoRoot(), "bundle")
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}
