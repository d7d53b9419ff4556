# lib.sh is what the scripts of hack/ share. A script sources it after
# naming itself, before anything may log:
#
#   here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
#   script=node
#   . "$here/lib.sh"

# log writes its arguments to stderr as a line of the script.
log() { echo "$script: $*" >&2; }

# die logs an error and exits 1.
die() {
	log "error: $*"
	exit 1
}

# usage prints the script's header comment (the lines before
# `set -euo pipefail`) and exits 2.
usage() {
	sed -n '2,/^set -euo pipefail/{/^#/s/^# \{0,1\}//p}' "$0" >&2
	exit 2
}

# release_tool builds the release module's command $1 (hack/release/cmd/$1:
# release, images, bundle) into bin/release-tools and prints its path. The
# release tooling is a Go module of its own: it is built where its go.mod
# is, then run from the repository root like any other tool.
release_tool() {
	local top
	top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	(cd "$top/hack/release" && go build -o "$top/bin/release-tools/$1" "./cmd/$1") >&2 || die "building hack/release/cmd/$1 failed"
	echo "$top/bin/release-tools/$1"
}
