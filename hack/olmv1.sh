#!/usr/bin/env bash
# olmv1.sh builds OLM v1 — operator-controller and catalogd — from the Go
# module hack/tools/olmv1 pins, for the node e2e's OLM v1 story, and prints
# the directory that holds them with OLM v1's own CRDs (crds/). Nothing is
# downloaded except through the Go module proxy.
#
#   hack/olmv1.sh            build it if missing, print the directory
#   hack/olmv1.sh --path     print the directory without building
#
# The directory is ${XDG_CACHE_HOME:-$HOME/.cache}/portico/olmv1/
# <version>-<key> (key: this script, hack/tools/olmv1's go.mod and go.sum),
# with the build's timings in build.txt. A cold build compiles for about a
# quarter of an hour on two cores (containers/image, Helm, client-go of
# OLM v1's own versions); a warm one only links.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=olmv1
. "$here/lib.sh"
module_dir="$here/tools/olmv1"
# The pin, from a require block or a one-line require.
version=$(awk '$1 == "require" && $2 == "github.com/operator-framework/operator-controller" {print $3; exit}
	$1 == "github.com/operator-framework/operator-controller" {print $2; exit}' "$module_dir/go.mod")
[[ -n "$version" ]] || die "hack/tools/olmv1/go.mod does not require github.com/operator-framework/operator-controller"
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/portico/olmv1
key=$(cat "$here/olmv1.sh" "$module_dir/go.mod" "$module_dir/go.sum" | sha256sum | cut -c1-12)
dir="$cache_root/$version-$key"

case "${1:-}" in
--path)
	echo "$dir"
	exit 0
	;;
"") ;;
*) usage ;;
esac

[[ -f "$dir/.complete" ]] && { echo "$dir"; exit 0; }
mkdir -p "$cache_root"
exec 8>"$cache_root/.$version-$key.lock"
flock 8
[[ -f "$dir/.complete" ]] && { echo "$dir"; exit 0; }

work="$dir.partial"
rm -rf "$work" && mkdir -p "$work/crds"
started=$(date +%s)
cd "$module_dir"

log "downloading operator-controller $version's build list (module proxy)"
go mod download
downloaded=$(date +%s)

# Static binaries as upstream builds them (containers/image without gpgme);
# one go build, so the packages both commands share compile once.
log "building operator-controller and catalogd $version"
CGO_ENABLED=0 go build -trimpath -tags containers_image_openpgp -ldflags "-s -w" -o "$work/" \
	github.com/operator-framework/operator-controller/cmd/operator-controller \
	github.com/operator-framework/operator-controller/cmd/catalogd
built=$(date +%s)

src=$(go list -m -f '{{.Dir}}' github.com/operator-framework/operator-controller)
cp "$src"/config/base/catalogd/crd/bases/*.yaml "$src"/config/base/operator-controller/crd/bases/*.yaml "$work/crds/"
chmod -R u+w "$work"
printf 'operator-controller and catalogd %s: download %ds, compile %ds\n' "$version" \
	$((downloaded - started)) $((built - downloaded)) | tee "$work/build.txt" >&2
touch "$work/.complete"
rm -rf "$dir" && mv "$work" "$dir"
echo "$dir"
