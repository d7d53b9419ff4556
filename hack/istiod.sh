#!/usr/bin/env bash
# istiod.sh builds istiod (Istio's pilot-discovery), the real Istio control
# plane of the node e2e suite, and prints the binary's path. It is built
# from the istio.io/istio version test/istio pins (a `tool` directive in
# test/istio/go.mod), inside that module, with the flags make gives
# `make test-istio` (CGO_ENABLED=0, -trimpath): the compile of Istio's packages is shared through Go's
# build cache with the offline check, whichever runs first. Nothing is
# downloaded except through the Go module proxy.
#
#   hack/istiod.sh            build it if missing, print its path
#   hack/istiod.sh --path     print the path without building
#
# The binary lands in ${XDG_CACHE_HOME:-$HOME/.cache}/portico/istiod/
# <version>-<key>/pilot-discovery (key: this script, test/istio's go.mod and
# go.sum), with the build's timings in build.txt beside it. A cold build
# compiles for about ten minutes on two cores; a warm one (test/istio
# compiled) only links.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=istiod
. "$here/lib.sh"
module_dir="$here/../test/istio"
# The pin, e.g. v0.0.0-20260827124520-eed52ebb66ad: its commit names the build.
pin=$(awk '$1 == "istio.io/istio" {print $2; exit}' "$module_dir/go.mod")
[[ -n "$pin" ]] || die "test/istio/go.mod does not require istio.io/istio"
version="1.31-${pin##*-}"
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/portico/istiod
key=$(cat "$here/istiod.sh" "$module_dir/go.mod" "$module_dir/go.sum" | sha256sum | cut -c1-12)
dir="$cache_root/$version-$key"
bin="$dir/pilot-discovery"

case "${1:-}" in
--path)
	echo "$bin"
	exit 0
	;;
"") ;;
*) usage ;;
esac

[[ -x "$bin" ]] && { echo "$bin"; exit 0; }
mkdir -p "$cache_root"
exec 8>"$cache_root/.$version-$key.lock"
flock 8
[[ -x "$bin" ]] && { echo "$bin"; exit 0; }

work="$dir.partial"
rm -rf "$work" && mkdir -p "$work"
started=$(date +%s)
cd "$module_dir"

log "downloading istio.io/istio $pin's build list (module proxy)"
go mod download
downloaded=$(date +%s)

# The flavour the Makefile exports to every go command (static, trimmed
# paths): both are part of every package's build action, so the packages
# are the ones `make test-istio` and lint compile. Only the link differs
# (-s -w, the version).
export CGO_ENABLED=0 GOFLAGS=-trimpath
log "building pilot-discovery $version"
go build -ldflags "-s -w -X istio.io/istio/pkg/version.buildVersion=$version" \
	-o "$work/pilot-discovery" istio.io/istio/pilot/cmd/pilot-discovery
built=$(date +%s)

mkdir -p "$dir"
printf 'pilot-discovery %s: download %ds, compile %ds, binary %d MiB\n' "$version" \
	$((downloaded - started)) $((built - downloaded)) $(($(stat -c %s "$work/pilot-discovery") / 1048576)) | tee "$dir/build.txt" >&2
mv "$work/pilot-discovery" "$bin"
rm -rf "$work"
echo "$bin"
