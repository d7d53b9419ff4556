#!/usr/bin/env bash
# cluster.sh manages a local kwok cluster that runs fully offline: every
# control-plane binary comes from hack/testbin.sh, so kwokctl never downloads
# anything (binaries, images or manifests).
#
#   hack/cluster.sh up [NAME]          create or reuse cluster NAME (default
#                                      "portico") with fake kwok node(s); prints
#                                      the kubeconfig path as the last line
#   hack/cluster.sh down [NAME]        delete cluster NAME (no-op if absent)
#   hack/cluster.sh kubeconfig [NAME]  print the kubeconfig path of NAME
#   hack/cluster.sh smoke [NAME]       roll out a 1-replica Deployment and wait
#                                      until it is Available, then remove it
#
# Only paths go to stdout; all logs go to stderr, so
#   export KUBECONFIG=$(hack/cluster.sh up)
# works.
#
# State lives outside the repository, under
#   ${XDG_CACHE_HOME:-$HOME/.cache}/portico/
#     kwok/                   KWOK_WORKDIR (cluster dirs, pki, etcd data, logs)
#     clusters/NAME.kubeconfig
#
# Environment:
#   PORTICO_KWOK_NODES    number of fake nodes to create (default 1; 0 for
#                         a cluster whose only node is real, see node.sh:
#                         then kwok-controller does not run)
#   PORTICO_CLUSTER_WAIT  how long to wait for readiness (default 180s)
#   PORTICO_APISERVER_ADVERTISE  an address of this host the API server
#                         listens on and advertises, so pods reach it
#                         through the `kubernetes` Service (node.sh); it
#                         then reaches kubelets at their InternalIP (logs,
#                         exec)
#   PORTICO_APISERVER_SANS  extra comma-separated serving-certificate SANs
#   PORTICO_ADMISSION     1 turns the API server's admission plugins on
#                         (ServiceAccount, PodSecurity, ...); kwokctl turns
#                         them off by default
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=cluster
. "$here/lib.sh"
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/portico
kubeconfig_dir=$cache_root/clusters
nodes=${PORTICO_KWOK_NODES:-1}
wait_timeout=${PORTICO_CLUSTER_WAIT:-180s}

# Keep kwokctl's state (and the ~/.kwok/kwok.yaml it would otherwise read)
# away from the user's own kwok setup and out of the repository. Clusters that
# share this workdir never get the same ports: kwokctl picks random free ports
# and skips the ones recorded by the other clusters here.
export KWOK_WORKDIR=$cache_root/kwok

# bin_dir prints the testbin directory; with "build" it builds missing
# binaries first (that is the only step that may take a while).
bin_dir() {
	if [[ "${1:-}" == build ]]; then
		"$here/testbin.sh"
	else
		"$here/testbin.sh" --path
	fi
}

# use_bins [build] sets $bin to the testbin directory and puts it first on
# PATH: kwokctl looks kubectl up on PATH and only downloads it (from
# KWOK_KUBECTL_BINARY, by default a dl.k8s.io URL) when that fails, so both
# point at the local binary.
use_bins() {
	bin=$(bin_dir "$@")
	export PATH="$bin:$PATH"
	export KWOK_KUBECTL_BINARY="$bin/kubectl"
}

# Both close the lock descriptor (see lock): kwokctl starts the control plane
# as background daemons, which would otherwise inherit it and hold the lock
# for as long as the cluster runs.
kwokctl() { "$bin/kwokctl" --name "$name" "$@" 9>&-; }
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@" 9>&-; }

# lock serialises "up" and "down" of the same cluster name (held on fd 9
# until the script exits).
lock() {
	mkdir -p "$KWOK_WORKDIR"
	exec 9>"$KWOK_WORKDIR/.$name.lock"
	flock --wait 600 9 || die "timed out waiting for $KWOK_WORKDIR/.$name.lock"
}

cluster_exists() { [[ -f "$KWOK_WORKDIR/clusters/$name/kwok.yaml" ]]; }

# write_kubeconfig stores a self-contained (flattened) kubeconfig at the
# stable path; written via a temp file so readers never see half a file.
write_kubeconfig() {
	mkdir -p "$kubeconfig_dir"
	local tmp
	tmp=$(mktemp "$kubeconfig_dir/.$name.XXXXXX")
	if ! kwokctl get kubeconfig >"$tmp"; then
		rm -f "$tmp"
		die "could not read the kubeconfig of cluster $name"
	fi
	chmod 0600 "$tmp"
	mv -f "$tmp" "$kubeconfig"
}

# kwok_config writes the kwokctl configuration that flags cannot express.
kwok_config() {
	local file=$1
	cat >"$file" <<-'EOF'
		apiVersion: config.kwok.x-k8s.io/v1alpha1
		kind: KwokctlConfiguration
		# Here, not as --extra-args: kwokctl v0.8.0 indexes the patches of
		# repeated --extra-args by the flag's position, which breaks (a
		# panic) when another component's flags come first.
		# leader-elect=false: there is one controller-manager; with leader
		# election on, after a restart it waits out the lease of its
		# previous process (~15s) before doing anything.
		# kube-api-qps/burst: the controller-manager's client defaults to 20
		# QPS, so the Endpoints and EndpointSlices of the benchmark's 20,000
		# Services (10,000 APIRules of two modes) would take ~17 minutes.
		componentsPatches:
		- name: kube-controller-manager
		  extraArgs:
		  - key: leader-elect
		    value: "false"
		  - key: kube-api-qps
		    value: "500"
		  - key: kube-api-burst
		    value: "1000"
		options:
		  # Matches the binaries from hack/testbin.sh (kwokctl v0.8.0 defaults
		  # to 1.36.1); only used for defaults, the real version is read from
		  # the binaries.
		  kubeVersion: v1.36.3
		  # kwokctl binds etcd, kube-apiserver and kwok-controller to 0.0.0.0
		  # by default; etcd has no authentication, so keep it all on loopback.
		  bindAddress: 127.0.0.1
	EOF
	if [[ -n "${PORTICO_APISERVER_SANS:-}" ]]; then
		echo "  kubeApiserverCertSANs: [${PORTICO_APISERVER_SANS}]" >>"$file"
	fi
	if [[ "${PORTICO_ADMISSION:-}" == 1 ]]; then
		echo "  kubeAdmission: true" >>"$file"
	fi
}

# apply_nodes creates the fake nodes. kwok-controller (as started by kwokctl)
# manages every node, the annotation makes that explicit. No taints: pods
# schedule onto these nodes without tolerations. kwok's default stages then
# mark the node Ready and every pod bound to it Running/Ready.
apply_nodes() {
	local i node manifest=""
	for ((i = 0; i < nodes; i++)); do
		node="kwok-node-$i"
		manifest+=$(
			cat <<-EOF
				apiVersion: v1
				kind: Node
				metadata:
				  name: $node
				  annotations:
				    kwok.x-k8s.io/node: fake
				    node.alpha.kubernetes.io/ttl: "0"
				  labels:
				    type: kwok
				    kubernetes.io/arch: amd64
				    kubernetes.io/os: linux
				    kubernetes.io/hostname: $node
				    node-role.kubernetes.io/agent: ""
				spec: {}
				status:
				  allocatable: {cpu: "64", memory: 256Gi, pods: "250", ephemeral-storage: 1Ti}
				  capacity: {cpu: "64", memory: 256Gi, pods: "250", ephemeral-storage: 1Ti}
				  nodeInfo: {architecture: amd64, operatingSystem: linux}
				---
			EOF
		)
		manifest+=$'\n'
	done
	kubectl apply -f - <<<"$manifest" >&2
}

cmd_up() {
	use_bins build

	lock

	if cluster_exists; then
		# The flags below only take effect on creation; an existing cluster
		# keeps its saved configuration (run "down" first to change it).
		log "reusing cluster $name (kwokctl restarts it if it is stopped)"
	else
		log "creating cluster $name"
	fi

	local config
	config=$(mktemp)
	# shellcheck disable=SC2064 # expand now: config is local.
	trap "rm -f '$config'" EXIT
	kwok_config "$config"

	# Every binary is a local file, so kwokctl symlinks instead of
	# downloading. Optional components (prometheus, jaeger, metrics-server,
	# dashboard, ...) stay off because none of their ports/--enable is set.
	# --node-lease-duration-seconds=0: node leases only matter for sharding
	# nodes between several kwok-controllers. With them on (default 40s x
	# heartbeat factor 5 = 200s), a restarted kwok-controller gets a new
	# identity and ignores its nodes, and so every pod on them, until the
	# lease the old process held expires, i.e. for up to ~4 minutes.
	# leader-elect=false: there is one scheduler; with leader election on,
	# after a restart it waits out the lease of its previous process (~15s)
	# before doing anything (the controller-manager's flags are in
	# kwok_config).
	# --kubeconfig= (empty) stops kwokctl from editing ~/.kube/config.
	local extra=()
	if [[ -n "${PORTICO_APISERVER_ADVERTISE:-}" ]]; then
		# Listen on every address (the advertised one included) while
		# kwokctl and the host keep using 127.0.0.1.
		extra+=(--extra-args "kube-apiserver=bind-address=0.0.0.0"
			--extra-args "kube-apiserver=advertise-address=$PORTICO_APISERVER_ADVERTISE"
			--extra-args "kube-apiserver=kubelet-preferred-address-types=InternalIP,Hostname"
			# Real kubelets authenticate the API server (logs, exec, port
			# forwarding) by a client certificate of the cluster CA.
			--extra-args "kube-apiserver=kubelet-client-certificate=$KWOK_WORKDIR/clusters/$name/pki/admin.crt"
			--extra-args "kube-apiserver=kubelet-client-key=$KWOK_WORKDIR/clusters/$name/pki/admin.key")
	fi
	if ((nodes == 0)); then
		# No fake nodes: without kwok-controller, kwok cannot take over the
		# real node's pods (it manages every node by default).
		extra+=(--disable kwok-controller)
	fi
	kwokctl create cluster \
		--config "$config" \
		"${extra[@]}" \
		--runtime binary \
		--etcd-binary "$bin/etcd" \
		--kube-apiserver-binary "$bin/kube-apiserver" \
		--kube-controller-manager-binary "$bin/kube-controller-manager" \
		--kube-scheduler-binary "$bin/kube-scheduler" \
		--kwok-controller-binary "$bin/kwok" \
		--node-lease-duration-seconds 0 \
		--extra-args kube-scheduler=leader-elect=false \
		--quiet-pull \
		--kubeconfig= \
		--wait "$wait_timeout" >&2

	write_kubeconfig

	log "waiting for the apiserver to be ready"
	local deadline=$((SECONDS + ${wait_timeout%s}))
	until kubectl get --raw /readyz >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "apiserver of $name is not ready after $wait_timeout"
		sleep 1
	done

	if ((nodes > 0)); then
		log "applying $nodes fake node(s)"
		apply_nodes
		kubectl wait --for=condition=Ready node --selector type=kwok --timeout "$wait_timeout" >&2
	fi

	# Pods need the default ServiceAccount, which the controller manager
	# creates shortly after start; waiting here avoids a racy first apply.
	until kubectl get serviceaccount default --namespace default >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "default ServiceAccount missing in $name after $wait_timeout"
		sleep 1
	done

	log "cluster $name is ready"
	echo "$kubeconfig"
}

cmd_down() {
	lock
	if ! cluster_exists; then
		log "cluster $name does not exist"
		rm -f "$kubeconfig"
		return 0
	fi
	use_bins
	[[ -x "$bin/kwokctl" ]] || die "kwokctl missing; run hack/testbin.sh first"

	# kwokctl removes its context from the given kubeconfig; point it at
	# ours (deleted below) so it never touches ~/.kube/config.
	log "deleting cluster $name"
	kwokctl delete cluster --kubeconfig "$kubeconfig" >&2
	rm -f "$kubeconfig"
}

cmd_kubeconfig() {
	if [[ ! -f "$kubeconfig" ]]; then
		cluster_exists || die "cluster $name does not exist; run: hack/cluster.sh up $name"
		use_bins
		write_kubeconfig
	fi
	echo "$kubeconfig"
}

cmd_smoke() {
	[[ -f "$kubeconfig" ]] || die "cluster $name has no kubeconfig; run: hack/cluster.sh up $name"
	use_bins
	local ns=portico-smoke
	# A leftover namespace from an earlier run may still be terminating.
	kubectl delete namespace "$ns" --ignore-not-found --timeout "$wait_timeout" >&2
	kubectl create namespace "$ns" >&2
	kubectl --namespace "$ns" create deployment smoke --image nginx --replicas 1 >&2
	kubectl --namespace "$ns" wait --for=condition=Available deployment/smoke --timeout "$wait_timeout" >&2
	kubectl --namespace "$ns" wait --for=jsonpath='{.status.readyReplicas}'=1 deployment/smoke --timeout "$wait_timeout" >&2
	kubectl --namespace "$ns" get deployment,pods --output wide >&2
	# Removing the pods first lets the namespace go in one pass; not waiting
	# for it saves ~5s (the next run waits if it is still terminating).
	kubectl --namespace "$ns" delete deployment smoke --cascade=foreground --timeout "$wait_timeout" >&2
	kubectl delete namespace "$ns" --wait=false >&2
	log "smoke test passed"
}

main() {
	[[ $# -ge 1 && $# -le 2 ]] || usage
	local cmd=$1
	name=${2:-portico}
	[[ "$name" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "invalid cluster name: $name"
	[[ "$nodes" =~ ^[0-9]+$ ]] || die "PORTICO_KWOK_NODES must be a non-negative integer"
	[[ "$wait_timeout" =~ ^[1-9][0-9]*s$ ]] || die "PORTICO_CLUSTER_WAIT must be in seconds, e.g. 180s"
	kubeconfig=$kubeconfig_dir/$name.kubeconfig

	case "$cmd" in
	up) cmd_up ;;
	down) cmd_down ;;
	kubeconfig) cmd_kubeconfig ;;
	smoke) cmd_smoke ;;
	*) usage ;;
	esac
}

main "$@"
