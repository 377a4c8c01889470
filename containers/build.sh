#!/usr/bin/env bash
# Build the ccbench Linux-node tooling image on this machine with rootful podman.
#
#   containers/build.sh            # set up podman, build base + image if needed
#   CCBENCH_REBUILD=1 containers/build.sh   # rebuild the tooling image regardless
#
# Steps (each skipped when already done, so a second run takes about a second):
#   1. apt-get install podman, runc, debootstrap, uidmap, fuse-overlayfs and catatonit
#      (podman run --init: the tools' PID 1, which passes signals on) if absent;
#   2. podman settings as a drop-in, /etc/containers/containers.conf.d/ccbench.conf:
#      the runc runtime (crun fails on this hybrid-cgroup host) and
#      default_ulimits = [] (podman would otherwise raise RLIMIT_NOFILE/NPROC above
#      the hard limits and be refused); an existing containers.conf is left alone;
#   3. the base image localhost/ccbench-base:bookworm from debootstrap --variant=minbase
#      (no registry is reachable here), imported only if absent;
#   4. localhost/ccbench-linux-node:latest from containers/linux-node/Dockerfile,
#      skipped when an image built from the same Dockerfile, entrypoint and base exists.
# Needs root. Environment overrides: CCBENCH_IMAGE, CCBENCH_BASE_IMAGE,
# CCBENCH_DEBIAN_MIRROR, CCBENCH_DEBIAN_SECURITY_MIRROR, CCBENCH_BUILD_CA (PEM bundle pip should trust while
# building; defaults to this host's bundle), CCBENCH_REBUILD=1.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
context="${here}/linux-node"
image="${CCBENCH_IMAGE:-localhost/ccbench-linux-node:latest}"
base_image="${CCBENCH_BASE_IMAGE:-localhost/ccbench-base:bookworm}"
suite="bookworm"
mirror="${CCBENCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${CCBENCH_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
build_ca="${CCBENCH_BUILD_CA:-/etc/ssl/certs/ca-certificates.crt}"
dropin_dir="/etc/containers/containers.conf.d"
dropin="${dropin_dir}/ccbench.conf"
hash_label="org.ccbench.build-input"

log() { printf 'build.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# apt-get, waiting for a lock held by another install (up to ~10 minutes).
apt_get() {
    local attempt
    for attempt in 1 2 3 4 5 6 7 8 9 10; do
        if apt-get -o DPkg::Lock::Timeout=60 "$@"; then
            return 0
        fi
        log "apt-get $1 failed (attempt ${attempt}); retrying in 30 s"
        sleep 30
    done
    return 1
}

ensure_packages() {
    local pkg missing=()
    for pkg in podman runc debootstrap uidmap fuse-overlayfs catatonit; do
        if ! dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("${pkg}")
        fi
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        return 0
    fi
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt_get update
    apt_get install -y --no-install-recommends "${missing[@]}"
}

configure_podman() {
    local want
    want='# Written by ccbench containers/build.sh. Rootful podman on this host needs:
#  - runc: crun fails here with "cgroups in hybrid mode not supported";
#  - no default ulimits: raising RLIMIT_NOFILE/NPROC past the hard limit is refused.
[containers]
default_ulimits = []

[engine]
runtime = "runc"
'
    if [ -f "${dropin}" ] && [ "$(cat "${dropin}")" = "${want%$'\n'}" ]; then
        return 0
    fi
    log "writing ${dropin}"
    mkdir -p "${dropin_dir}"
    printf '%s' "${want}" > "${dropin}.tmp"
    mv "${dropin}.tmp" "${dropin}"
}

verify_podman() {
    local runtime
    runtime="$(podman info --format '{{.Host.OCIRuntime.Name}}')"
    [ "${runtime}" = "runc" ] || die "podman uses runtime '${runtime}', not runc: ${dropin} is not in effect"
    # A container start is the real test of default_ulimits = [].
    podman run --rm --pull=never --network none "${base_image}" true \
        || die "podman cannot start a container from ${base_image}; see ${dropin}"
}

ensure_base_image() {
    if podman image exists "${base_image}"; then
        return 0
    fi
    local root
    root="$(mktemp -d /var/tmp/ccbench-base.XXXXXX)"
    # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
    trap "rm -rf --one-file-system -- '${root}'" EXIT
    log "debootstrap --variant=minbase ${suite} (${mirror})"
    debootstrap --variant=minbase "${suite}" "${root}" "${mirror}" >&2
    # debootstrap leaves only "<suite> main": add the point-release and security updates.
    printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' \
        "${mirror}" "${suite}" "${mirror}" "${suite}" "${security_mirror}" "${suite}" \
        > "${root}/etc/apt/sources.list"
    rm -rf -- "${root}/var/cache/apt/archives/"*.deb "${root}/var/lib/apt/lists/"*
    log "importing ${base_image}"
    tar -C "${root}" -c . | podman import \
        --change 'CMD ["/bin/bash"]' \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        - "${base_image}" >/dev/null
    rm -rf --one-file-system -- "${root}"
    trap - EXIT
}

# Digest of everything the tooling image is built from.
build_input_hash() {
    {
        podman image inspect --format '{{.Id}}' "${base_image}"
        sha256sum "${context}/Dockerfile" "${context}/entrypoint.sh"
    } | sha256sum | cut -d' ' -f1
}

ensure_image() {
    local want have
    want="$(build_input_hash)"
    if [ "${CCBENCH_REBUILD:-0}" != "1" ] && podman image exists "${image}"; then
        have="$(podman image inspect --format "{{index .Labels \"${hash_label}\"}}" "${image}")"
        if [ "${have}" = "${want}" ]; then
            log "${image} is up to date"
            return 0
        fi
    fi
    local args=(
        build
        --network host
        --pull=never
        --format docker
        --build-arg "BASE=${base_image}"
        --label "${hash_label}=${want}"
        --tag "${image}"
    )
    if [ -s "${build_ca}" ]; then
        args+=(--volume "${build_ca}:/dev/ccbench-build-ca.crt:ro")
    fi
    local old_id=""
    if podman image exists "${image}"; then
        old_id="$(podman image inspect --format '{{.Id}}' "${image}")"
    fi
    log "building ${image}"
    podman "${args[@]}" "${context}" >&2
    # Drop the image this build superseded (now untagged), unless a container uses it.
    if [ -n "${old_id}" ] && [ "$(podman image inspect --format '{{.Id}}' "${image}")" != "${old_id}" ]; then
        podman rmi "${old_id}" >/dev/null 2>&1 || true
    fi
}

main() {
    [ "$(id -u)" -eq 0 ] || die "run as root (rootful podman; the image's tools need CAP_NET_ADMIN)"
    ensure_packages
    configure_podman
    ensure_base_image
    verify_podman
    ensure_image
    podman image exists "${image}" || die "${image} missing after build"
    log "ready: ${image}"
}

main "$@"
