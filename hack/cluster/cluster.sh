#!/usr/bin/env bash
# A single-node Kubernetes on this machine, from parts it can get (docs/development.md, "A real
# cluster on this machine"):
#   etcd, kube-apiserver         the envtest build (hack/envtest.sh)
#   kubelet, kube-proxy,         built from the same pinned k8s.io/kubernetes module
#   kube-controller-manager,     (hack/envtest/go.mod), cached beside the envtest binaries
#   kube-scheduler
#   containerd, runc, CNI        Debian packages (containerd, runc, containernetworking-plugins)
#   CoreDNS                      built from its Go module (hack/cluster/coredns/go.mod)
#   the pause image              built locally (hack/cluster/pause, hack/cluster/images.sh)
#
#   hack/cluster/cluster.sh build            build and cache the binaries; print their dirs
#   hack/cluster/cluster.sh up               bring the cluster up; print the kubeconfig's path
#   hack/cluster/cluster.sh import TAR...    import image archives into the cluster's containerd
#   hack/cluster/cluster.sh down             stop it and leave the machine as it was
#   hack/cluster/cluster.sh status           exit 0 when a cluster is up
#
# Pods live on a bridge (cni0, 10.244.0.0/24) that only this machine sees; the API server,
# the kubelet, kube-proxy and CoreDNS listen on its address 10.244.0.1 (or loopback), and a
# raw-table rule drops whatever a pod sends beyond the pod and Service ranges, so no traffic
# leaves the machine. One cluster per machine: fixed names and ports. `up` waits up to
# CLUSTER_LOCK_WAIT seconds (default 0) for another cluster to go down, and takes over the
# state of one whose processes have all died.
#
# Needs root (iptables, mounts, cgroups) and cgroup v1 or v2. Progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
name=cluster
# shellcheck source=common.sh
source "$here/common.sh"

coredns_version=$(awk '{for (i = 1; i < NF; i++) if ($i == "github.com/coredns/coredns") {print $(i + 1); exit}}' "$here/coredns/go.mod")
# The plugins compiled in are chosen in main.go: a change there is a new binary.
coredns_hash=$(cat "$here/coredns/main.go" "$here/coredns/go.sum" | sha256sum | cut -c1-12)
coredns_bin="$cache/coredns/${coredns_version}-${coredns_hash}-linux-${arch}/coredns"

# The machine-wide state of the one cluster: what runs (state), what it changed (host).
state=${CLUSTER_STATE_DIR:-/var/lib/ratelimit-cluster}
run=/run/ratelimit-cluster
mutex=/run/ratelimit-cluster.lock
node=ratelimit-node
bridge=cni0
node_ip=10.244.0.1
pod_cidr=10.244.0.0/24
service_cidr=10.244.1.0/24
api_service_ip=10.244.1.1
guard_cidr=10.244.0.0/23 # pods may reach only the pod and Service ranges
etcd_port=12379
etcd_peer_port=12380
network=ratelimit-cluster
guard_comment="ratelimit-cluster: pods reach only pods, Services and the node"
pause_image=localhost/ratelimit-cluster/pause:1

log() { echo "cluster: $*" >&2; }
die() {
  echo "cluster: error: $*" >&2
  exit 1
}

# ---------------------------------------------------------------------------------------------
# Parts

# need_packages installs the Debian packages the cluster runs on when a command is missing.
need_packages() {
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v nft >/dev/null || missing+=(nftables)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v podman >/dev/null || missing+=(podman)
  command -v ip >/dev/null || missing+=(iproute2)
  ((${#missing[@]} == 0)) || apt_install "${missing[@]}" >&2
}

# go_build LABEL OUT DIR PKG LDFLAGS: a static build of PKG in module DIR, timed.
go_build() {
  local label=$1 out=$2 dir=$3 pkg=$4 flags=$5 t0=$SECONDS
  log "building $label (cached afterwards; the kubelet alone takes about 10 min cold on 2 cores)"
  mkdir -p "$(dirname "$out")"
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$flags" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  log "$label built in $((SECONDS - t0))s"
}

# build makes every binary the cluster runs that is not cached yet.
build() {
  "$repo/hack/envtest.sh" >/dev/null
  local ldflags="-s -w" minor=${k8s_version#*.} p c
  minor=${minor%%.*}
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X $p.gitVersion=v${k8s_version} -X $p.gitMajor=${k8s_version%%.*} -X $p.gitMinor=${minor}"
    ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  for c in kubelet kube-controller-manager kube-scheduler kube-proxy; do
    [[ -x $k8s_bin/$c ]] || go_build "$c" "$k8s_bin/$c" "$repo/hack/envtest" "k8s.io/kubernetes/cmd/$c" "$ldflags"
  done
  [[ -x $k8s_bin/agnhost ]] || go_build agnhost "$k8s_bin/agnhost" "$repo/hack/envtest" k8s.io/kubernetes/test/images/agnhost "-s -w"
  [[ -x $coredns_bin ]] || go_build "coredns $coredns_version" "$coredns_bin" "$here/coredns" . "-s -w"
  echo "$k8s_bin"
}

# ---------------------------------------------------------------------------------------------
# State and the lock

pids_alive() {
  local f pid
  for f in "$run"/pids/*; do
    [[ -e $f ]] || continue
    pid=$(<"$f")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && return 0
  done
  return 1
}

# claim takes the machine's one cluster slot: waits while another cluster runs, cleans up
# after one whose processes all died.
claim() {
  local deadline=$((SECONDS + ${CLUSTER_LOCK_WAIT:-0}))
  while true; do
    exec 9>"$mutex"
    flock 9
    if [[ ! -d $run ]]; then
      mkdir -p "$run/pids"
      echo "$$" >"$run/owner"
      flock -u 9
      exec 9>&- # the daemons must not inherit the lock
      return 0
    fi
    if ! pids_alive; then
      log "a previous cluster died without 'down': cleaning up after it"
      flock -u 9
      teardown
      continue
    fi
    flock -u 9
    ((SECONDS < deadline)) || die "another cluster is up on this machine ($run); run 'hack/cluster/cluster.sh down' (or set CLUSTER_LOCK_WAIT)"
    sleep 5
  done
}

# ---------------------------------------------------------------------------------------------
# Bring-up

# snapshot_host records what teardown must restore or may remove.
snapshot_host() {
  local host=$state/host
  mkdir -p "$host"
  local k
  for k in $(sysctl_keys); do
    [[ -e /proc/sys/${k//.//} ]] && echo "$k=$(sysctl -n "$k")"
  done >"$host/sysctls"
  for d in /var/lib/kubelet /var/log/pods /var/log/containers /var/lib/cni /run/containerd /run/netns /opt/cni /etc/cni; do
    [[ -e $d ]] && echo "$d"
  done >"$host/existed"
  ls /run/netns 2>/dev/null >"$host/netns" || true
  ls /var/log/pods 2>/dev/null >"$host/podlogs" || true
  nft list tables 2>/dev/null | sort >"$host/nft-tables" || true
  local ipt t
  for ipt in iptables ip6tables; do
    for t in filter nat mangle raw; do
      "$ipt-save" -t "$t" 2>/dev/null | awk -v t="$t" '/^:/{print t, substr($1, 2)}'
    done
  done >"$host/chains"
}

# sysctl_keys: what the kubelet, kube-proxy and this script set, all restored by teardown.
sysctl_keys() {
  echo vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops \
    kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward \
    net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables \
    net.bridge.bridge-nf-call-ip6tables net.netfilter.nf_conntrack_max \
    net.netfilter.nf_conntrack_tcp_timeout_established net.netfilter.nf_conntrack_tcp_timeout_close_wait \
    net.netfilter.nf_conntrack_tcp_be_liberal net.ipv4.vs.conntrack net.ipv4.conf.all.arp_ignore \
    net.ipv4.conf.all.arp_announce
}

network_up() {
  sysctl -qw net.ipv4.ip_forward=1
  # Service traffic between two pods on the bridge must pass conntrack both ways.
  sysctl -qw net.bridge.bridge-nf-call-iptables=1
  ip link show "$bridge" >/dev/null 2>&1 && die "a $bridge device exists already; is another cluster (or CNI) using it?"
  ip link add "$bridge" type bridge
  ip addr add "$node_ip/24" dev "$bridge"
  ip link set "$bridge" up
  iptables -t raw -I PREROUTING -i "$bridge" ! -d "$guard_cidr" -m comment --comment "$guard_comment" -j DROP
  mkdir -p "$state/cni"
  cat >"$state/cni/10-$network.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$network",
  "plugins": [{
    "type": "bridge",
    "bridge": "$bridge",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": "$state/cni-ipam",
      "ranges": [[{"subnet": "$pod_cidr", "gateway": "$node_ip"}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
EOF
  echo "nameserver $node_ip" >"$state/resolv.conf"
}

# cert NAME CN [O] [SANs]: a client or serving certificate signed by the cluster CA.
cert() {
  local n=$1 cn=$2 o=${3:-} sans=${4:-} ca=${5:-ca} pki=$state/pki subj
  subj="/CN=$cn"
  [[ -n $o ]] && subj="/O=$o$subj"
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/$n.key" 2>/dev/null
  openssl req -new -key "$pki/$n.key" -subj "$subj" -out "$pki/$n.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [[ -n $sans ]]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$sans"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } >"$pki/$n.ext"
  openssl x509 -req -in "$pki/$n.csr" -CA "$pki/$ca.crt" -CAkey "$pki/$ca.key" -CAcreateserial \
    -days 30 -sha256 -extfile "$pki/$n.ext" -out "$pki/$n.crt" 2>/dev/null
  rm -f "$pki/$n.csr" "$pki/$n.ext"
}

# kubeconfig NAME: a kubeconfig for the client certificate NAME.
kubeconfig() {
  local n=$1 pki=$state/pki
  cat >"$state/$n.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $network
  cluster:
    server: https://$node_ip:6443
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $n
  user:
    client-certificate-data: $(base64 -w0 "$pki/$n.crt")
    client-key-data: $(base64 -w0 "$pki/$n.key")
contexts:
- name: $network
  context: {cluster: $network, user: $n}
current-context: $network
EOF
  chmod 600 "$state/$n.kubeconfig"
}

pki() {
  local pki=$state/pki
  mkdir -p "$pki"
  chmod 700 "$pki"
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=ratelimit-cluster-ca" -days 30 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$pki/ca.crt" 2>/dev/null
  cert apiserver kube-apiserver "" "IP:$node_ip,IP:$api_service_ip,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert admin admin system:masters
  cert kubelet "system:node:$node" system:nodes
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert proxy system:kube-proxy
  # The aggregation layer: kube-apiserver proxies to APIServices (the operator's usage API)
  # with a client certificate of its own CA, which they trust through the ConfigMap
  # kube-system/extension-apiserver-authentication (filled from the --requestheader flags).
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/front-proxy-ca.key" 2>/dev/null
  openssl req -x509 -new -key "$pki/front-proxy-ca.key" -subj "/CN=ratelimit-front-proxy-ca" -days 30 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$pki/front-proxy-ca.crt" 2>/dev/null
  cert front-proxy-client front-proxy-client "" "" front-proxy-ca
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/sa.key" 2>/dev/null
  openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  local k
  for k in admin kubelet controller-manager scheduler proxy; do kubeconfig "$k"; done
}

# start NAME BIN ARGS...: runs a daemon in its own session, logging to logs/NAME.log.
start() {
  local n=$1
  shift
  setsid "$@" </dev/null >"$state/logs/$n.log" 2>&1 &
  echo $! >"$run/pids/$n"
}

# wait_for WHAT SECONDS CMD...: retries CMD until it succeeds.
wait_for() {
  local what=$1 limit=$2 t0=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS - t0 >= limit)); then
      log "$what not ready after ${limit}s; last lines of the logs:"
      tail -n 20 "$state"/logs/*.log >&2 || true
      return 1
    fi
    sleep 0.5
  done
}

kctl() { "$kubectl" --kubeconfig "$state/admin.kubeconfig" "$@"; }

containerd_config() {
  cat >"$state/containerd.toml" <<EOF
version = 2
root = "$state/containerd"
state = "$run/containerd"
oom_score = 0
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "$run/containerd.sock"

[ttrpc]
  address = "$run/containerd.sock.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # The VM's capability bounding set lacks CAP_SYS_RESOURCE: no negative OOM score adjustment.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$run/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni"
    max_conf_num = 1
EOF
}

kubelet_config() {
  cat >"$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization:
  mode: Webhook
# cgroup v1 on these machines: still allowed in 1.37 when asked for.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$run/containerd.sock
clusterDomain: cluster.local
clusterDNS: [$node_ip]
resolvConf: $state/resolv.conf
# No negative OOM score (no CAP_SYS_RESOURCE in this VM).
oomScoreAdj: 0
failSwapOn: false
protectKernelDefaults: false
# A busy shared disk must not evict test pods or their images.
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
imageMinimumGCAge: 24h
serializeImagePulls: false
maxPods: 110
shutdownGracePeriod: 0s
EOF
}

up_failed() {
  local keep=${TMPDIR:-/tmp}/ratelimit-cluster-logs
  rm -rf "$keep"
  cp -r "$state/logs" "$keep" 2>/dev/null || true
  log "up failed: tearing down (the logs are kept in $keep)"
  teardown
}

up() {
  [[ $(id -u) -eq 0 ]] || die "run as root"
  need_packages
  build >/dev/null
  [[ -x $k8s_bin/kube-apiserver && -x $k8s_bin/etcd ]] || die "envtest binaries missing in $k8s_bin"
  kubectl=$("$repo/hack/kubectl.sh" --pinned)
  claim
  # Whatever fails from here on leaves nothing behind.
  trap 'up_failed' EXIT
  local t0=$SECONDS
  mkdir -p "$state/logs"
  snapshot_host
  network_up
  pki
  containerd_config
  kubelet_config

  start etcd "$k8s_bin/etcd" --name "$node" --data-dir "$state/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "$node=http://127.0.0.1:$etcd_peer_port" --listen-metrics-urls ""
  local pki=$state/pki
  start kube-apiserver "$k8s_bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address "$node_ip" --advertise-address "$node_ip" --secure-port 6443 \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --service-cluster-ip-range "$service_cidr" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP --profiling=false \
    --requestheader-client-ca-file "$pki/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$pki/front-proxy-client.crt" --proxy-client-key-file "$pki/front-proxy-client.key"
  start containerd containerd --config "$state/containerd.toml"
  wait_for "kube-apiserver" 120 kctl get --raw /readyz
  wait_for "containerd" 60 ctr --address "$run/containerd.sock" version
  "$here/images.sh" pause "$state/pause.tar" >/dev/null
  import "$state/pause.tar"

  start kube-controller-manager "$k8s_bin/kube-controller-manager" --kubeconfig "$state/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$state/controller-manager.kubeconfig" --authorization-kubeconfig "$state/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --service-cluster-ip-range "$service_cidr" --cluster-cidr "$pod_cidr" --allocate-node-cidrs=false \
    --profiling=false
  start kube-scheduler "$k8s_bin/kube-scheduler" --kubeconfig "$state/scheduler.kubeconfig" \
    --authentication-kubeconfig "$state/scheduler.kubeconfig" --authorization-kubeconfig "$state/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --profiling=false
  start kube-proxy "$k8s_bin/kube-proxy" --kubeconfig "$state/proxy.kubeconfig" --hostname-override "$node" \
    --bind-address "$node_ip" --cluster-cidr "$pod_cidr" --proxy-mode iptables --oom-score-adj 0 \
    --conntrack-max-per-core 0 --healthz-bind-address 127.0.0.1:10256 --metrics-bind-address 127.0.0.1:10249
  cat >"$state/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    bind $node_ip
    errors
    health 127.0.0.1:10253
    ready 127.0.0.1:10254
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $state/admin.kubeconfig
        pods insecure
        ttl 5
    }
    cache 5
}
EOF
  start coredns "$coredns_bin" -conf "$state/Corefile"
  start kubelet "$k8s_bin/kubelet" --config "$state/kubelet.yaml" --kubeconfig "$state/kubelet.kubeconfig" \
    --root-dir "$state/kubelet" --hostname-override "$node" --node-ip "$node_ip"

  wait_for "node $node" 120 kctl wait --for condition=Ready "node/$node" --timeout 1s
  log "node Ready $((SECONDS - t0))s after start"
  wait_for "the default ServiceAccount" 60 kctl -n default get serviceaccount default
  wait_for "CoreDNS" 60 bash -c "exec 3<>/dev/tcp/127.0.0.1/10254 && printf 'GET /ready HTTP/1.0\r\n\r\n' >&3 && grep -q ' 200 ' <&3"
  trap - EXIT
  log "cluster up in $((SECONDS - t0))s; KUBECONFIG=$state/admin.kubeconfig"
  echo "$state/admin.kubeconfig"
}

# import TAR...: loads image archives (docker-archive or OCI) into the cluster's containerd.
import() {
  local tar
  for tar in "$@"; do
    ctr --address "$run/containerd.sock" -n k8s.io images import --no-unpack=false "$tar" >/dev/null
  done
}

# ---------------------------------------------------------------------------------------------
# Teardown

# stop NAME: SIGTERM, then SIGKILL after 10s, the daemon started as NAME.
stop() {
  local f=$run/pids/$1 pid
  [[ -s $f ]] || return 0
  pid=$(<"$f")
  if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# shims prints the PIDs of containerd shims serving this cluster's containerd (they outlive
# it): found by the socket address on their command line.
shims() {
  local p cmd
  for p in /proc/[0-9]*; do
    { cmd=$(tr '\0' ' ' <"$p/cmdline"); } 2>/dev/null || continue
    [[ $cmd == *containerd-shim* && $cmd == *"$run/containerd.sock"* ]] && echo "${p#/proc/}"
  done
}

# stop_pods kills every container and sandbox through containerd, then its shims.
stop_pods() {
  local sock=$run/containerd.sock id pid
  if [[ -S $sock ]] && ctr --address "$sock" version >/dev/null 2>&1; then
    for id in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 1
    for id in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
    done
  fi
  for pid in $(shims); do kill -KILL "$pid" 2>/dev/null || true; done
}

# unmount_under DIR...: every mount below the directories, deepest first.
unmount_under() {
  local d m
  for d in "$@"; do
    awk -v d="$d/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
  done
}

# remove_cgroups deletes the kubepods cgroups the kubelet made, deepest first.
remove_cgroups() {
  local c
  for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/kubepods.slice; do
    [[ -d $c ]] || continue
    find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

# new_chains IPT TABLE: the chains of the table that did not exist before `up` (the cluster's:
# kube-proxy's KUBE-*, the kubelet's canaries; another tool's chains are left alone).
new_chains() {
  local ipt=$1 t=$2
  "$ipt-save" -t "$t" 2>/dev/null | awk -v t="$t" '/^:/{print t, substr($1, 2)}' |
    grep -vxF -f "$state/host/chains" | awk '{print $2}' || true
}

# restore_iptables removes this cluster's rules and chains: kube-proxy's (its own cleanup
# first), then every chain that appeared since `up` with the rules that jump to it, the guard,
# and nft tables that appeared and hold no rule.
restore_iptables() {
  local ipt t chain rule family table
  [[ -x $k8s_bin/kube-proxy ]] && "$k8s_bin/kube-proxy" --cleanup >/dev/null 2>&1 || true
  while iptables -t raw -D PREROUTING -i "$bridge" ! -d "$guard_cidr" -m comment --comment "$guard_comment" -j DROP 2>/dev/null; do :; done
  [[ -f $state/host/chains ]] || return 0
  for ipt in iptables ip6tables; do
    for t in filter nat mangle raw; do
      local chains
      chains=$(new_chains "$ipt" "$t")
      [[ -n $chains ]] || continue
      for chain in $chains; do
        "$ipt-save" -t "$t" 2>/dev/null | grep -E -- "^-A .* -j $chain( |\$)" | while read -r rule; do
          eval "$ipt -t $t ${rule/-A /-D }" 2>/dev/null || true
        done
      done
      for chain in $chains; do "$ipt" -t "$t" -F "$chain" 2>/dev/null || true; done
      for chain in $chains; do "$ipt" -t "$t" -X "$chain" 2>/dev/null || true; done
    done
  done
  if command -v nft >/dev/null && [[ -f $state/host/nft-tables ]]; then
    nft list tables 2>/dev/null | sort | comm -13 "$state/host/nft-tables" - | while read -r _ family table; do
      # A rule's line ends in "# handle N" and is not a table or chain header.
      if ! nft -a list table "$family" "$table" 2>/dev/null | grep -E '# handle [0-9]+$' | grep -qvE '^\s*(table|chain) '; then
        nft delete table "$family" "$table" 2>/dev/null || true
      fi
    done
  fi
}

restore_sysctls() {
  local line key value
  [[ -f $state/host/sysctls ]] || return 0
  while IFS= read -r line; do
    key=${line%%=*} value=${line#*=}
    [[ $(sysctl -n "$key" 2>/dev/null) == "$value" ]] || sysctl -qw "$key=$value" 2>/dev/null || true
  done <"$state/host/sysctls"
}

existed() { grep -qxF "$1" "$state/host/existed" 2>/dev/null; }

# remove_host_dirs removes what the kubelet and CNI wrote to fixed places: the directory when
# it did not exist before the cluster, else only the entries the cluster added.
remove_host_dirs() {
  local d e
  for e in $(ls /run/netns 2>/dev/null); do
    [[ $e == cni-* ]] && ! grep -qxF "$e" "$state/host/netns" 2>/dev/null && { umount "/run/netns/$e" 2>/dev/null || true; rm -f "/run/netns/$e"; }
  done
  for e in $(ls /var/log/pods 2>/dev/null); do
    grep -qxF "$e" "$state/host/podlogs" 2>/dev/null || rm -rf "/var/log/pods/$e"
  done
  find /var/log/containers -maxdepth 1 -xtype l -delete 2>/dev/null || true
  rm -f /var/lib/cni/results/"$network"-* 2>/dev/null || true
  rm -rf "/var/lib/cni/networks/$network" 2>/dev/null || true
  for d in /var/lib/kubelet /var/log/pods /var/log/containers /var/lib/cni /run/containerd /run/netns /opt/cni /etc/cni; do
    [[ -e $d ]] || continue
    existed "$d" && continue
    if [[ $d == /run/containerd ]]; then
      # Only when no other containerd uses it.
      [[ -S /run/containerd/containerd.sock ]] && continue
    fi
    unmount_under "$d"
    rm -rf "$d"
  done
}

teardown() {
  local t0=$SECONDS
  [[ -d $run || -d $state ]] || return 0
  # Best effort, every step: one that fails must not keep the next from cleaning up.
  set +e
  stop kubelet
  stop_pods
  local n
  for n in coredns kube-proxy kube-scheduler kube-controller-manager containerd kube-apiserver etcd; do stop "$n"; done
  for pid in $(shims); do kill -KILL "$pid" 2>/dev/null || true; done
  unmount_under "$state" "$run"
  remove_cgroups
  restore_iptables
  # The pods' veths (their namespaces are gone with the netns mounts, but not always yet).
  for n in $(ip -o link show master "$bridge" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link del "$n" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  restore_sysctls
  remove_host_dirs
  rm -rf "$state" "$run"
  set -e
  log "down in $((SECONDS - t0))s"
}

down() {
  [[ $(id -u) -eq 0 ]] || die "run as root"
  exec 9>"$mutex"
  flock 9
  teardown
  flock -u 9
}

status() {
  [[ -d $run ]] && pids_alive && echo "$state/admin.kubeconfig"
}

case ${1:-} in
build)
  [[ $(id -u) -ne 0 ]] || need_packages
  build
  ;;
up) up ;;
down) down ;;
import)
  shift
  import "$@"
  ;;
status) status ;;
*) die "usage: $0 build|up|down|import TAR...|status" ;;
esac
