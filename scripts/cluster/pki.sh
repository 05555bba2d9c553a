# shellcheck shell=bash
# The cluster's certificates and kubeconfigs, made once with openssl and kept
# in $PKI across `down` (sourced by scripts/cluster/bring-up.sh). One CA signs the
# API server's serving certificate and every client's: the components
# authenticate as kubeadm's do (system:kube-controller-manager,
# system:kube-scheduler, system:node:NAME in system:nodes, system:kube-proxy),
# the API server to the kubelet as a system:masters client, and the admin
# kubeconfig is a system:masters client too. Service-account tokens are
# signed with their own key pair.

# client NAME SUBJECT: a key and a certificate for a client.
pki_client() {
	local name=$1 subj=$2
	[ -f "$PKI/$name.crt" ] && return 0
	openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -subj "$subj" \
		-out "$PKI/$name.csr" 2>/dev/null
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
		-CAcreateserial -days 3650 -sha256 -out "$PKI/$name.crt" \
		-extfile <(printf 'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n') 2>/dev/null
	rm -f "$PKI/$name.csr"
}

# kubeconfig FILE NAME SERVER: a kubeconfig for client NAME's certificate.
pki_kubeconfig() {
	local file=$1 name=$2 server=$3
	cat >"$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: codepod-cluster
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 <"$PKI/$name.crt")
    client-key-data: $(base64 -w0 <"$PKI/$name.key")
contexts:
- name: codepod-cluster
  context: {cluster: codepod-cluster, user: $name}
current-context: codepod-cluster
KC
	chmod 0600 "$file"
}

pki_make() {
	mkdir -p "$PKI"
	chmod 0700 "$PKI"
	if [ ! -f "$PKI/ca.crt" ]; then
		openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -days 3650 \
			-subj "/CN=codepod-cluster-ca" -out "$PKI/ca.crt" 2>/dev/null
	fi
	if [ ! -f "$PKI/apiserver.crt" ]; then
		openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/apiserver.key" \
			-subj "/CN=kube-apiserver" -out "$PKI/apiserver.csr" 2>/dev/null
		openssl x509 -req -in "$PKI/apiserver.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
			-CAcreateserial -days 3650 -sha256 -out "$PKI/apiserver.crt" -extfile <(
				printf 'keyUsage=critical,digitalSignature,keyEncipherment\n'
				printf 'extendedKeyUsage=serverAuth\n'
				printf 'subjectAltName=IP:127.0.0.1,IP:%s,IP:%s,DNS:localhost,' "$NODE_IP" "$SERVICE_IP"
				printf 'DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,'
				printf 'DNS:kubernetes.default.svc.cluster.local\n'
			) 2>/dev/null
		rm -f "$PKI/apiserver.csr"
	fi
	if [ ! -f "$PKI/sa.key" ]; then
		openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
		openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	fi
	pki_client admin "/O=system:masters/CN=codepod-cluster-admin"
	pki_client apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
	pki_client controller-manager "/CN=system:kube-controller-manager"
	pki_client scheduler "/CN=system:kube-scheduler"
	pki_client kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
	pki_client kube-proxy "/CN=system:kube-proxy"
	local local_api="https://127.0.0.1:$APISERVER_PORT" n
	pki_kubeconfig "$ADMIN_KUBECONFIG" admin "$local_api"
	for n in controller-manager scheduler kubelet kube-proxy; do
		pki_kubeconfig "$PKI/$n.kubeconfig" "$n" "$local_api"
	done
}
