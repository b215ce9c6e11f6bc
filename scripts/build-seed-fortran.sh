#!/usr/bin/env bash
# Builds the seed's Fortran port (examples/seed_fortran.f90 on the module capi/fortran/
# sized_readback.f90, its kernel in examples/seed_fortran_kernel.cu) against the static library,
# and with --run runs it and compares its output with the seed's expected lines, as
# scripts/build-seed-capi.sh does for the C++ port.
#
# Usage: scripts/build-seed-fortran.sh [--run] [LIBDIR] [OUTPUT]   (--run may come anywhere)
#   LIBDIR  holds libsized_readback.a (default: target/release; built with cargo if missing and
#           cargo is there). The GPU host has no Rust: it uses the staged .gpu-capi/.
#   OUTPUT  the executable (default: LIBDIR/seed_fortran).
# Environment: FC (default gfortran; the GPU host has gfortran-13), FFLAGS (default
# -O2 -std=f2018 -Wall -Wextra), NVCC (else scripts/find-nvcc.sh finds one, the pip wheel of
# `cargo xtask dev-env`'s included), CXX (default g++: only asked where libstdc++ is if FC's driver
# does not know).
# The commands it runs (printed as it runs them):
#   $FC $FFLAGS -J OBJ -c capi/fortran/sized_readback.f90 examples/cout_format.f90 examples/seed_fortran.f90
#   $NVCC -O2 -c examples/seed_fortran_kernel.cu
#   $FC -o OUTPUT *.o LIBDIR/libsized_readback.a -L<cudart dir> -lcudart_static -lstdc++ -lpthread -ldl -lm -lrt
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
run=0
args=()
for a in "$@"; do
  if [ "$a" = "--run" ]; then run=1; else args+=("$a"); fi
done
libdir="${args[0]:-$root/target/release}"
out="${args[1]:-$libdir/seed_fortran}"
source "$root/scripts/host-program.sh"
srb_capi_lib build-seed-fortran "$libdir"
FC="${FC:-gfortran}"
command -v "$FC" >/dev/null || { echo "build-seed-fortran: no Fortran compiler '$FC' (apt-get install gfortran, or set FC)" >&2; exit 1; }
read -r -a fflags <<<"${FFLAGS:--O2 -std=f2018 -Wall -Wextra}"
source "$root/scripts/find-nvcc.sh"
show() { echo "+ $*"; "$@"; }

obj="$(mktemp -d)"
trap 'rm -rf "$obj"' EXIT
# The module first (its .mod goes to $obj, -J), then the formatter, then the program.
for src in capi/fortran/sized_readback.f90 examples/cout_format.f90 examples/seed_fortran.f90; do
  show "$FC" "${fflags[@]}" -J "$obj" -c "$root/$src" -o "$obj/$(basename "$src" .f90).o"
done
show "$NVCC" -O2 -c "$root/examples/seed_fortran_kernel.cu" -o "$obj/seed_fortran_kernel.o"

# The CUDA runtime's static library (scripts/find-nvcc.sh found where).
ldirs=()
if [ -n "$CUDART_LIBDIR" ]; then ldirs+=(-L"$CUDART_LIBDIR"); fi
# libstdc++ (cudart_static and the kernel object need it): FC's driver finds its own GCC's; a
# gfortran without the matching g++ may not, so ask the C++ driver where its copy is.
if [ "$("$FC" -print-file-name=libstdc++.so)" = "libstdc++.so" ] && command -v "${CXX:-g++}" >/dev/null; then
  so="$("${CXX:-g++}" -print-file-name=libstdc++.so)"
  if [ "$so" != "libstdc++.so" ]; then ldirs+=(-L"$(dirname "$so")"); fi
fi
# The .a by path (not -l), so a libsized_readback.so beside it is not picked instead.
show "$FC" -o "$out" "$obj/sized_readback.o" "$obj/cout_format.o" "$obj/seed_fortran.o" \
  "$obj/seed_fortran_kernel.o" "$lib" "${ldirs[@]}" -lcudart_static -lstdc++ -lpthread -ldl -lm -lrt
echo "build-seed-fortran: built $out"
if [ "$run" = 1 ]; then
  srb_run_seed build-seed-fortran "$out"
fi
