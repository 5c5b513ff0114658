#!/bin/bash
# Lab fixture: the certificates and kubeconfigs `kubeadm init` writes (its phases "certs" and "kubeconfig"), made with
# openssl because no kubeadm binary can be had here. Same files, same names, same subjects as kubeadm's
# (https://kubernetes.io/docs/setup/best-practices/certificates/), except admin.conf, whose user is in system:masters
# (kubeadm's super-admin.conf) because nothing here creates kubeadm's kubeadm:cluster-admins binding.
# Idempotent: what exists is kept, so a second run changes nothing.
#   kubeadm-pki.sh init NODE_NAME NODE_IP          CAs, serving and client certificates, the control plane's kubeconfigs
#   kubeadm-pki.sh kubelet NODE_NAME NODE_IP API_IP   /etc/kubernetes/pki/kubelets/NODE_NAME.conf for another node's kubelet
# Prints "created PATH" for each file it wrote.
set -euo pipefail
umask 077
pki=/etc/kubernetes/pki
days=3650

key() { [ -s "$1" ] || { openssl genrsa -out "$1" 2048 2>/dev/null; echo "created $1"; }; }

ca() {  # ca NAME CN
  key "$pki/$1.key"
  [ -s "$pki/$1.crt" ] && return 0
  # self-signed with only these extensions: `req -x509` would add openssl.cnf's own too, and Go before 1.17 (so
  # Kubernetes 1.22) refuses a certificate with an extension twice
  local ext
  ext=$(mktemp)
  printf '%s\n' "basicConstraints=critical,CA:TRUE" "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign" \
    "subjectKeyIdentifier=hash" >"$ext"
  openssl req -new -key "$pki/$1.key" -subj "/CN=$2" 2>/dev/null |
    openssl x509 -req -signkey "$pki/$1.key" -days "$days" -sha256 -extfile "$ext" -out "$pki/$1.crt" 2>/dev/null
  rm -f "$ext"
  echo "created $pki/$1.crt"
}

cert() {  # cert NAME CA SUBJECT USAGE [SAN]: a certificate signed by CA (a name under $pki, without .crt)
  local name=$1 ca=$2 subject=$3 usage=$4 san=${5:-} ext
  key "$pki/$name.key"
  [ -s "$pki/$name.crt" ] && return 0
  ext=$(mktemp)
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [ -z "$san" ] || echo "subjectAltName=$san"
  } >"$ext"
  openssl req -new -key "$pki/$name.key" -subj "$subject" 2>/dev/null |
    openssl x509 -req -CA "$pki/$ca.crt" -CAkey "$pki/$ca.key" -CAcreateserial -days "$days" -sha256 \
      -extfile "$ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$ext"
  echo "created $pki/$name.crt"
}

kubeconfig() {  # kubeconfig FILE SERVER USER CERT_NAME: a kubeconfig with an embedded client certificate
  local file=$1 server=$2 user=$3 name=$4
  [ -s "$file" ] && return 0
  cat >"$file" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
    server: $server
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    user: $user
  name: $user@kubernetes
current-context: $user@kubernetes
preferences: {}
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 "$pki/$name.crt")
    client-key-data: $(base64 -w0 "$pki/$name.key")
KUBECONFIG
  echo "created $file"
}

init() {
  local node=$1 ip=$2 server="https://$2:6443"
  mkdir -p "$pki/etcd" "$pki/kubelets"
  ca ca kubernetes
  ca front-proxy-ca front-proxy-ca
  ca etcd/ca etcd-ca
  cert apiserver ca /CN=kube-apiserver serverAuth \
    "DNS:$node,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:10.96.0.1,IP:$ip,IP:127.0.0.1"
  cert apiserver-kubelet-client ca "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  cert front-proxy-client front-proxy-ca /CN=front-proxy-client clientAuth
  cert etcd/server etcd/ca "/CN=$node" serverAuth,clientAuth "DNS:$node,DNS:localhost,IP:$ip,IP:127.0.0.1,IP:0:0:0:0:0:0:0:1"
  cert etcd/peer etcd/ca "/CN=$node" serverAuth,clientAuth "DNS:$node,DNS:localhost,IP:$ip,IP:127.0.0.1,IP:0:0:0:0:0:0:0:1"
  cert etcd/healthcheck-kube-etcd etcd/ca /CN=kube-etcd-healthcheck-client clientAuth
  cert apiserver-etcd-client etcd/ca /CN=kube-apiserver-etcd-client clientAuth
  key "$pki/sa.key"
  [ -s "$pki/sa.pub" ] || { openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null; echo "created $pki/sa.pub"; }
  cert kubelets/admin ca "/O=system:masters/CN=kubernetes-admin" clientAuth
  cert kubelets/controller-manager ca /CN=system:kube-controller-manager clientAuth
  cert kubelets/scheduler ca /CN=system:kube-scheduler clientAuth
  cert "kubelets/$node" ca "/O=system:nodes/CN=system:node:$node" clientAuth
  kubeconfig /etc/kubernetes/admin.conf "$server" kubernetes-admin kubelets/admin
  kubeconfig /etc/kubernetes/controller-manager.conf "$server" system:kube-controller-manager kubelets/controller-manager
  kubeconfig /etc/kubernetes/scheduler.conf "$server" system:kube-scheduler kubelets/scheduler
  kubeconfig /etc/kubernetes/kubelet.conf "$server" "system:node:$node" "kubelets/$node"
}

kubelet() {  # the kubeconfig of another node's kubelet, signed here (kubeadm join's TLS bootstrap, done at once)
  local node=$1 api_ip=$3
  cert "kubelets/$node" ca "/O=system:nodes/CN=system:node:$node" clientAuth
  kubeconfig "$pki/kubelets/$node.conf" "https://$api_ip:6443" "system:node:$node" "kubelets/$node"
}

case ${1:-} in
  init) init "$2" "$3" ;;
  kubelet) kubelet "$2" "$3" "$4" ;;
  *) echo "usage: $0 init NODE_NAME NODE_IP | kubelet NODE_NAME NODE_IP API_IP" >&2; exit 2 ;;
esac
