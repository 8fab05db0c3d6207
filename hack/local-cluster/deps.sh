#!/usr/bin/env bash
# Installs the Debian packages the local cluster needs and a fresh Debian 12
# lacks: runc, the CNI plugins (bridge, host-local, portmap, loopback in
# /usr/lib/cni), iptables and nftables, ipset (kube-router's firewall),
# iproute2 and openssl. Needs root; does
# nothing when all are present.
set -euo pipefail

pkgs=()
command -v runc >/dev/null || pkgs+=(runc)
[[ -x /usr/lib/cni/bridge ]] || pkgs+=(containernetworking-plugins)
command -v iptables >/dev/null || pkgs+=(iptables)
command -v nft >/dev/null || pkgs+=(nftables)
command -v ipset >/dev/null || pkgs+=(ipset)
command -v ip >/dev/null || pkgs+=(iproute2)
command -v openssl >/dev/null || pkgs+=(openssl)
if [[ ${#pkgs[@]} -eq 0 ]]; then exit 0; fi
echo "local-cluster: apt-get install ${pkgs[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
