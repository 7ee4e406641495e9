# The steps of scripts/k8s-env.sh, one function each; sourced by it (its variables and
# helpers are in scope).

install_packages() {
  local missing=()
  [ -x /usr/bin/etcd ] || missing+=(etcd-server)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  command -v python3 >/dev/null 2>&1 || missing+=(python3)
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  # policy-rc.d (where present) keeps etcd's package from starting a service; ours
  # listens on ports of its own anyway.
  apt-get install -y -qq "${missing[@]}" >/dev/null
}

# containerd_config: the project's containerd config. Root here lacks CAP_SYS_RESOURCE,
# so the CRI plugin must not give a Pod's sandbox a negative oom_score_adj (runc fails
# every Pod with "can't get final child's PID from pipe: EOF" otherwise). Everything
# else is containerd's default, plus Debian's CNI binary directory and a CNI config
# directory no other tool writes to.
containerd_config() {
  cat <<EOF
# Written by cordon's scripts/k8s-env.sh; containerd runs with it for the test cluster.
version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    restrict_oom_score_adj = true
    sandbox_image = "$pause_image"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$cni_dir"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
EOF
}

# containerd_with_config IMAGE: (re)starts the standard containerd with the project's
# config when it runs without it, then makes sure dockerd and the cordon namespace's
# IMAGE are still there (scripts/container-env.sh starts and imports what is missing).
containerd_with_config() {
  local image=$1 want pid='' cmd changed='' before after
  mkdir -p "$etc" "$cni_dir"
  want=$(containerd_config)
  if [ "$(cat "$ctr_conf" 2>/dev/null)" != "$want" ]; then
    printf '%s\n' "$want" >"$ctr_conf"
    changed=1
  fi
  # The containerd that serves the standard socket: a process named containerd whose
  # command line names that socket, or no address at all (the default).
  for p in $(pgrep -x containerd || true); do
    cmd=" $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) " || continue
    case $cmd in
      *" --address $ctr_sock "* | *" -a $ctr_sock "* | *" --address=$ctr_sock "*) pid=$p ;;
      *" --address"* | *" -a "*) ;;
      *) pid=${pid:-$p} ;;
    esac
  done
  [ -n "$pid" ] || die "no containerd process serves $ctr_sock"
  cmd=" $(tr '\0' ' ' <"/proc/$pid/cmdline") "
  if [[ $cmd == *" --config $ctr_conf "* ]] && [ -z "$changed" ]; then
    return 0
  fi
  log "restarting containerd ($pid) with $ctr_conf (its running containers and dockerd stay)"
  before=$(ctr --address "$ctr_sock" -n cordon images ls -q | sort)
  kill "$pid"
  for _ in $(seq 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && die "containerd ($pid) did not stop in 30 s"
  setsid containerd --config "$ctr_conf" --address "$ctr_sock" </dev/null >>/var/log/cordon-containerd.log 2>&1 &
  for _ in $(seq 300); do
    ctr --address "$ctr_sock" version >/dev/null 2>&1 && break
    sleep 0.1
  done
  ctr --address "$ctr_sock" plugins ls 2>/dev/null | grep "io.containerd.grpc.v1 *cri .* ok" >/dev/null ||
    die "containerd's CRI plugin is not running; see /var/log/cordon-containerd.log"
  after=$(ctr --address "$ctr_sock" -n cordon images ls -q | sort)
  [ "$before" = "$after" ] ||
    die "containerd's cordon namespace changed across the restart: lost $(comm -23 <(echo "$before") <(echo "$after") | tr '\n' ' ')"
  # dockerd reconnects to the restarted containerd by itself; container-env.sh starts it
  # again if it did not.
  for _ in $(seq 100); do
    docker version >/dev/null 2>&1 && break
    sleep 0.1
  done
  "$here/container-env.sh" "$image" >/dev/null
  docker image inspect "$image" >/dev/null || die "dockerd lost $image after containerd's restart"
  log "containerd restarted; dockerd answers, the cordon namespace kept its $(echo "$after" | grep -c .) images"
}

# import_images IMAGE: the pause image (busybox sleeping; containerd's CRI asks for it by
# name and nothing can be pulled) and the test IMAGE in containerd's k8s.io namespace.
import_images() {
  local image=$1 root
  if ! docker image inspect "$pause_image" >/dev/null 2>&1; then
    log "building $pause_image from $(readlink -f /bin/busybox)"
    root=$(mktemp -d)
    mkdir -p "$root/bin"
    cp /bin/busybox "$root/bin/busybox"
    tar --numeric-owner --owner=0 --group=0 -C "$root" -c . |
      docker import -c 'ENTRYPOINT ["/bin/busybox", "sleep", "2147483647"]' \
        -m 'cordon test cluster pause image (Debian busybox-static)' - "$pause_image" >/dev/null
    rm -rf "$root"
  fi
  for i in "$pause_image" "$image"; do
    if ! ctr -n k8s.io images ls -q | grep -x "$(containerd_ref "$i")" >/dev/null; then
      log "importing $i into containerd namespace k8s.io"
      docker save "$i" | ctr -n k8s.io images import --all-platforms - >/dev/null
    fi
  done
}

# containerd_ref NAME: NAME as containerd stores it (docker.io/ and library/ added).
containerd_ref() {
  local n=$1
  case "${n%%/*}" in *.*|*:*|localhost) ;; *) [[ $n == */* ]] || n=library/$n; n=docker.io/$n ;; esac
  echo "$n"
}

# network: the node's address, on the loopback interface (the kubelet refuses a
# loopback IP as the node IP, and this kernel has no dummy interfaces: an address of
# another range on lo is neither, and its traffic never leaves the host), and the Pods'
# CNI config: a bridge without a gateway or masquerading, so a Pod reaches its own
# loopback and the other Pods, nothing else. Bridged frames pass through iptables where
# br_netfilter is loaded (bridge-nf-call-iptables), and dockerd sets the FORWARD
# policy to DROP: one rule accepts what goes from a port of the Pods' bridge to
# another, so Pods reach each other as on a real cluster (the egress tests' baseline).
network() {
  mkdir -p "$cni_dir"
  ip addr show dev lo | grep -F "inet $node_ip/" >/dev/null || ip addr add "$node_ip/32" dev lo
  iptables -C FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null ||
    iptables -I FORWARD 1 -i "$bridge" -o "$bridge" -j ACCEPT
  cat >"$cni_dir/10-cordon-k8s.conflist.tmp" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "cordon-k8s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]], "dataDir": "$state/cni"}
    },
    {"type": "loopback"}
  ]
}
EOF
  mv "$cni_dir/10-cordon-k8s.conflist.tmp" "$cni_dir/10-cordon-k8s.conflist"
}

# pki: a CA, the API server's serving certificate, its client certificate for the
# kubelet, the service-account key and the static tokens (admin, kubelet), once.
pki() {
  local d=$state/pki
  mkdir -p "$d"
  chmod 700 "$state" "$d"
  [ -s "$d/ca.crt" ] && [ -s "$d/sa.key" ] && [ -s "$state/admin.token" ] && return 0
  log "making the cluster's certificates and tokens in $state"
  (
    cd "$d"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -keyout ca.key -out ca.crt \
      -subj /CN=cordon-k8s-ca 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr \
      -subj /CN=kube-apiserver 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:%s,IP:%s,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' \
      "$node_ip" "${svc_cidr%.0/24}.1" >apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout kubelet-client.key -out kubelet-client.csr \
      -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile client.ext -out kubelet-client.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f ./*.csr ./*.ext
  )
  (
    umask 077
    openssl rand -hex 32 >"$state/admin.token"
    openssl rand -hex 32 >"$state/kubelet.token"
    printf '%s,admin,admin,system:masters\n%s,system:node:%s,system:node:%s,system:nodes\n' \
      "$(cat "$state/admin.token")" "$(cat "$state/kubelet.token")" "$node" "$node" >"$state/tokens.csv"
  )
  write_kubeconfig "$kubeconfig" admin "$(cat "$state/admin.token")"
  write_kubeconfig "$state/kubelet.kubeconfig" "system:node:$node" "$(cat "$state/kubelet.token")"
}

# write_kubeconfig PATH USER TOKEN
write_kubeconfig() {
  (
    umask 077
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: cordon-k8s
  cluster:
    server: $api
    certificate-authority-data: $(base64 -w0 "$state/pki/ca.crt")
users:
- name: $2
  user:
    token: $3
contexts:
- name: cordon-k8s
  context: {cluster: cordon-k8s, user: $2}
current-context: cordon-k8s
EOF
  )
}

start_etcd() {
  running etcd >/dev/null && return 0
  mkdir -p "$state/etcd"
  chmod 700 "$state/etcd"
  local peer=http://127.0.0.1:$((etcd_port + 1)) client=http://127.0.0.1:$etcd_port
  launch etcd /usr/bin/etcd --name cordon-k8s --data-dir "$state/etcd" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "cordon-k8s=$peer" \
    --auto-compaction-retention 1h --quota-backend-bytes $((1 << 30))
  wait_until 60 etcd curl -sS --fail --max-time 2 "$client/health"
}

start_apiserver() {
  local bin=$1 d=$state/pki
  if ! running kube-apiserver >/dev/null; then
    launch kube-apiserver "$bin/kube-apiserver" \
      --etcd-servers "http://127.0.0.1:$etcd_port" \
      --bind-address 127.0.0.1 --secure-port "$api_port" --advertise-address "$node_ip" \
      --tls-cert-file "$d/apiserver.crt" --tls-private-key-file "$d/apiserver.key" \
      --client-ca-file "$d/ca.crt" --token-auth-file "$state/tokens.csv" \
      --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
      --service-account-key-file "$d/sa.pub" --service-account-signing-key-file "$d/sa.key" \
      --service-account-issuer https://kubernetes.default.svc \
      --service-cluster-ip-range "$svc_cidr" \
      --kubelet-client-certificate "$d/kubelet-client.crt" --kubelet-client-key "$d/kubelet-client.key" \
      --kubelet-preferred-address-types InternalIP \
      --allow-privileged=false --profiling=false --v=1
  fi
  log "waiting up to ${wait_api}s for the API server to be ready"
  local t0=$SECONDS
  wait_until "$wait_api" kube-apiserver curl_api "$api/readyz"
  log "API server ready ($((SECONDS - t0)) s)"
}

# kubelet_config: cgroups here are hybrid (v1 plus v2 at /sys/fs/cgroup/unified) and the
# kubelet runs outside systemd, hence cgroupfs, failCgroupV1 false and no per-QoS
# cgroups or allocatable enforcement. No image GC and near-zero eviction thresholds:
# the local images cannot be pulled back, and a full disk elsewhere must not evict tests.
kubelet_config() {
  cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://$ctr_sock
address: $node_ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
rotateCertificates: false
serverTLSBootstrap: false
EOF
}

# seccomp_profile: installs the kubernetes placement's seccomp profile where the
# kubelet finds Localhost profiles (<root-dir>/seccomp), under the name the placement
# uses by default, made by cordon itself from this checkout (docs/kubernetes.md: a
# node's administrator runs the same command). Rewritten only when it changed.
seccomp_profile() {
  local dir=$state/kubelet/seccomp name=cordon/pod-v1.json tmp
  mkdir -p "$dir/$(dirname "$name")"
  tmp=$(mktemp)
  (cd "$here/.." && PATH=$PATH:/usr/local/go/bin CGO_ENABLED=0 go run -trimpath ./cmd/cordon internal seccomp-profile) >"$tmp" ||
    { rm -f "$tmp"; die "cordon internal seccomp-profile failed"; }
  if cmp -s "$tmp" "$dir/$name"; then
    rm -f "$tmp"
  else
    log "installing the Pods' seccomp profile at $dir/$name"
    chmod 0644 "$tmp" && mv "$tmp" "$dir/$name"
  fi
}

start_kubelet() {
  local bin=$1
  if ! running kubelet >/dev/null; then
    mkdir -p "$state/kubelet"
    kubelet_config >"$state/kubelet.yaml"
    launch kubelet "$bin/kubelet" --config "$state/kubelet.yaml" \
      --kubeconfig "$state/kubelet.kubeconfig" --root-dir "$state/kubelet" \
      --cert-dir "$state/kubelet/pki" --hostname-override "$node" --node-ip "$node_ip" --v=1
    date +%s >"$run/kubelet.started"
  fi
  log "waiting up to ${wait_node}s for node $node to be Ready"
  local t0=$SECONDS
  wait_until "$wait_node" kubelet node_ready
  log "node $node Ready ($((SECONDS - t0)) s)"
}

# node_ready: the node's Ready condition is True and was reported by this kubelet: after
# a restart etcd still holds the last run's Ready until the node's lease runs out.
node_ready() {
  curl_api "$api/api/v1/nodes/$node" | python3 -c '
import datetime, json, sys
since = int(sys.argv[1])
node = json.load(sys.stdin)
for c in node.get("status", {}).get("conditions", []):
    if c["type"] == "Ready":
        beat = datetime.datetime.fromisoformat(c["lastHeartbeatTime"].replace("Z", "+00:00"))
        sys.exit(0 if c["status"] == "True" and beat.timestamp() >= since - 1 else 1)
sys.exit(1)' "$(cat "$run/kubelet.started" 2>/dev/null || echo 0)"
}

# stop_all: deletes every Pod through the API (so the kubelet tears down their
# sandboxes and CNI addresses), then stops the kubelet, the API server and etcd, and
# removes the node's network. containerd keeps running, with the project's config.
stop_all() {
  if running kubelet >/dev/null && running kube-apiserver >/dev/null && [ -s "$state/admin.token" ]; then
    local nss
    nss=$(curl_api "$api/api/v1/namespaces" 2>/dev/null | python3 -c '
import json, sys
print(" ".join(n["metadata"]["name"] for n in json.load(sys.stdin)["items"]))' 2>/dev/null || true)
    for ns in $nss; do
      curl_api -X DELETE "$api/api/v1/namespaces/$ns/pods?gracePeriodSeconds=0" >/dev/null 2>&1 || true
    done
    for _ in $(seq 120); do
      [ -z "$(ctr -n k8s.io tasks ls -q 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  stop_pid kubelet
  rm -f "$run/kubelet.started"
  # The kubelet bind-mounts its root onto itself (and volumes below it): undo that, the
  # deepest first, so reset can remove the directory.
  awk -v p="$state/kubelet" '$2 == p || index($2, p "/") == 1 { print $2 }' /proc/mounts | sort -r |
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
  stop_pid kube-apiserver
  stop_pid etcd
  [ -n "$(ctr -n k8s.io tasks ls -q 2>/dev/null)" ] &&
    log "containerd's k8s.io namespace still has running tasks: $(ctr -n k8s.io tasks ls -q | tr '\n' ' ')"
  ip addr del "$node_ip/32" dev lo 2>/dev/null || true
  ip link del "$bridge" 2>/dev/null || true
  iptables -D FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null || true
  return 0
}
