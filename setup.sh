#!/usr/bin/env bash
# ccbench set-up for a fresh Debian 12 (or Ubuntu 24.04) machine, as root:
# Debian packages, a Python venv (.venv) with ccbench and its tools, the native delay
# element, the PyPI geni-lib with its Python-3 fix-up, and the Linux-node tooling image.
# Idempotent: rerun at will.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
if [ "$(id -u)" != 0 ]; then
  echo "setup.sh: needs root (apt-get, network namespaces): run 'sudo ./setup.sh'" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
pkgs=(
  python3 python3-venv python3-pip
  iproute2 iptables nftables ethtool iputils-ping iperf3 fping irtt procps kmod psmisc
  gcc make pkg-config libnetfilter-queue-dev libmnl-dev
  poppler-utils libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz0b libharfbuzz-subset0
  fonts-dejavu-core shellcheck
  openssh-server openssh-client
  podman runc debootstrap uidmap catatonit
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

py=python3
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "setup.sh: Python >= 3.11 needed, found $("$py" --version)" >&2; exit 1; }
[ -x .venv/bin/python ] || "$py" -m venv .venv
echo "setup: Python packages into .venv"
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e '.[dev]'
.venv/bin/pip install -q 'geni-lib==0.9.9.4' six
.venv/bin/python scripts/fix_genilib.py
# Bytecode for ccbench's own modules: where PYTHONDONTWRITEBYTECODE is set, every
# ccbench command (each workflow job) would otherwise compile them all again (~0.2 s).
.venv/bin/python -m compileall -q src

echo "setup: building native/ccdelay"
make -s -C native/ccdelay

# The Linux-node tooling image (testbed.tools: container; its tests): built once on a
# machine (debootstrap, apt-get and pip inside, about 1.5 minutes), a second after.
echo "setup: the tooling image (containers/build.sh)"
bash containers/build.sh

for tool in ccbench snakemake flent; do
  ln -sf "$PWD/.venv/bin/$tool" "/usr/local/bin/$tool"
done
echo "setup: done. Try: sudo snakemake --cores 4 all"
