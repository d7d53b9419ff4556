#!/usr/bin/env bash
# oauth2proxy.sh builds oauth2-proxy, the real OIDC login authorizer of the
# node e2e suite's login story, from its Go module and prints the binary's
# path. Nothing is downloaded except through the Go module proxy.
#
#   hack/oauth2proxy.sh            build it if missing, print its path
#   hack/oauth2proxy.sh --path     print the path without building
#
# oauth2-proxy's module has no replace directives, so `go install …@version`
# builds it as the proxy serves it (its go.mod needs Go 1.26.0).
#
# The binary lands in ${XDG_CACHE_HOME:-$HOME/.cache}/portico/oauth2-proxy/
# <version>-<key>/oauth2-proxy, with the build's timings in build.txt
# beside it. A cold build downloads about 150 MB of modules and compiles
# for a few minutes.
set -euo pipefail

OAUTH2_PROXY_VERSION=v7.15.6

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=oauth2proxy
. "$here/lib.sh"
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/portico/oauth2-proxy
key=$(sha256sum "$here/oauth2proxy.sh" | cut -c1-12)
dir="$cache_root/$OAUTH2_PROXY_VERSION-$key"
bin="$dir/oauth2-proxy"

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
exec 8>"$cache_root/.$OAUTH2_PROXY_VERSION-$key.lock"
flock 8
[[ -x "$bin" ]] && { echo "$bin"; exit 0; }

work="$dir.partial"
rm -rf "$work" && mkdir -p "$work"
export CGO_ENABLED=0 GOFLAGS=-trimpath
module=github.com/oauth2-proxy/oauth2-proxy/v7
started=$(date +%s)

log "downloading oauth2-proxy $OAUTH2_PROXY_VERSION (module proxy)"
# The module's build list, downloaded before the compile so build.txt can
# tell the two apart.
src=$(go mod download -json "$module@$OAUTH2_PROXY_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
(cd "$src" && go mod download)
downloaded=$(date +%s)

log "building oauth2-proxy $OAUTH2_PROXY_VERSION"
GOBIN="$work" go install -ldflags "-s -w -X $module/pkg/version.VERSION=$OAUTH2_PROXY_VERSION" "$module@$OAUTH2_PROXY_VERSION"
built=$(date +%s)

mkdir -p "$dir"
printf 'oauth2-proxy %s: download %ds, compile %ds, binary %d MiB\n' "$OAUTH2_PROXY_VERSION" \
	$((downloaded - started)) $((built - downloaded)) $(($(stat -c %s "$work/oauth2-proxy") / 1048576)) | tee "$dir/build.txt" >&2
mv "$work/oauth2-proxy" "$bin"
rm -rf "$work"
echo "$bin"
