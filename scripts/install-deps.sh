#!/bin/sh
# Installs what building and testing madmpi needs, when it is missing: a C/C++ toolchain,
# make, pkg-config, binutils (nm), the build systems whose MPI discovery the tests check (CMake;
# Meson with Ninja), and libfabric (headers for the ofi transport, fi_info and fi_pingpong for
# its tests and benchmarks). With --bench, also MPICH and Open MPI (the references the
# benchmarks compare against). Never fails a build for a package it cannot install: it says so
# (without libfabric, the build leaves the ofi transport out and says so).
set -u
need=""
for tool in cc:gcc c++:g++ make:make pkg-config:pkg-config nm:binutils cmake:cmake meson:meson \
    ninja:ninja-build; do
    cmd=${tool%%:*}; pkg=${tool#*:}
    command -v "$cmd" >/dev/null 2>&1 || need="$need $pkg"
done
pkg-config --exists libfabric 2>/dev/null || need="$need libfabric-dev"
command -v fi_pingpong >/dev/null 2>&1 || need="$need libfabric-bin"
if [ "${1:-}" = "--bench" ]; then
    # Debian's mpich brings mpicc.mpich; its mpi.h comes with libmpich-dev.
    if ! command -v mpicc.mpich >/dev/null 2>&1 \
        || ! ls $(mpicc.mpich -show 2>/dev/null | tr ' ' '\n' | sed -n 's/^-I//p' | sed 's|$|/mpi.h|') \
            >/dev/null 2>&1; then
        need="$need mpich libmpich-dev"
    fi
    command -v mpicc.openmpi >/dev/null 2>&1 || need="$need openmpi-bin libopenmpi-dev"
fi
[ -z "$need" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: installing$need"
    apt-get update -qq >/dev/null 2>&1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null 2>&1 \
        || echo "install-deps: could not install$need" >&2
else
    echo "install-deps: missing$need (install them with your package manager)" >&2
fi
exit 0
