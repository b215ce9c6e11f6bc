#!/usr/bin/env bash
# CI test of the C API's packages (README, "C and C++"): installs into a temporary prefix, moves
# the prefix, then builds and runs consumers (capi/tests/consumers/) through each of
#   CMake find_package(sized_readback 0.1 CONFIG REQUIRED)  (static and shared targets; a Fortran
#   program on the installed module source),
#   pkg-config (sized_readback-static, and sized_readback for the .so),
#   a plain cc / c++ command (C99 and C++17, -Wall -Wextra -Werror -pedantic; the C++ one also
#   with the CUDA toolkit's <cuda.h> included first, when a toolkit's headers are there);
# then compiles README.md's C, C++, Fortran and CUDA snippets against the same prefix
# (scripts/test-readme-snippets.sh: its header states which blocks and how; CUDA ones need nvcc).
# Without a driver each consumer must print the library's "driver was not found" error and exit
# 1; with a GPU it must exit 0.
# Usage: bash scripts/test-packages.sh   (SRB_LIBDIR=dir with built libraries skips the build)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/capi/tests/consumers"
for t in cmake pkg-config "${CC:-cc}"; do
  if ! command -v "$t" >/dev/null && [ "${SRB_CI:-0}" != 1 ]; then
    echo "test-packages: no $t here (apt-get install cmake pkg-config gcc): skipped"; exit 0
  fi
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
bash "$root/scripts/install-capi.sh" "$work/staging" > "$work/install.log"
head -1 "$work/install.log"
mv "$work/staging" "$work/moved"
prefix="$work/moved"
cc="${CC:-cc}" cxx="${CXX:-c++}"
strict=(-Wall -Wextra -Werror -pedantic)

source "$root/scripts/host-program.sh"
gpu=0
if srb_gpu_present; then gpu=1; fi
fail=0
check() { # check LABEL EXE [env...]: runs EXE and checks its exit status and message
  local label=$1 exe=$2 out rc
  shift 2
  set +e
  out="$(env "$@" "$exe" 2>&1)"; rc=$?
  set -e
  if [ $gpu = 1 ] && [ $rc = 0 ]; then
    echo "test-packages: $label: ok (ran on the GPU: $out)"
  elif [ $gpu = 0 ] && [ $rc = 1 ] && grep -q "driver library (libcuda) was not found" <<<"$out"; then
    echo "test-packages: $label: ok (no driver: exit 1, \"${out##*: }\")"
  else
    echo "test-packages: $label: FAILED (exit $rc): $out" >&2; fail=1
  fi
}

# SONAME and the .so the shared consumers record.
soname="$(readelf -d "$prefix/lib/libsized_readback.so.0.1.0" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')"
[ "$soname" = libsized_readback.so.0 ] || { echo "test-packages: SONAME is '$soname'" >&2; fail=1; }

# 1. CMake
cmake -S "$src" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS="${strict[*]}" -DCMAKE_CXX_FLAGS="${strict[*]}" >"$work/cmake.log" 2>&1 \
  || { cat "$work/cmake.log" >&2; exit 1; }
grep -o 'sized_readback [0-9.]* from .*' "$work/cmake.log" | sed 's/^/test-packages: cmake found /'
cmake --build "$work/cmake" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
check "cmake sized_readback::sized_readback (static, C99)" "$work/cmake/consumer_static"
needed="$(readelf -d "$work/cmake/consumer_shared" | sed -n 's/.*NEEDED.*\[\(libsized_readback[^]]*\)\]/\1/p')"
[ "$needed" = libsized_readback.so.0 ] || { echo "test-packages: consumer_shared records '$needed'" >&2; fail=1; }
check "cmake sized_readback::shared (C++17, records $needed)" "$work/cmake/consumer_shared"

if command -v "${FC:-gfortran}" >/dev/null || [ "${SRB_CI:-0}" = 1 ]; then
  FC="${FC:-gfortran}" cmake -S "$src/fortran" -B "$work/cmake-f" -DCMAKE_PREFIX_PATH="$prefix" \
    >"$work/cmake-f.log" 2>&1 && cmake --build "$work/cmake-f" >>"$work/cmake-f.log" 2>&1 \
    || { cat "$work/cmake-f.log" >&2; exit 1; }
  check "cmake, Fortran, the module from sized_readback_FORTRAN_MODULE_SOURCE" "$work/cmake-f/consumer_fortran"
else
  echo "test-packages: no gfortran: skipped the Fortran consumer"
fi

# 2. pkg-config
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --exact-version 0.1.0 sized_readback-static
# shellcheck disable=SC2046
"$cc" -std=c99 "${strict[@]}" -o "$work/pc_static" "$src/consumer.c" $(pkg-config --cflags --libs sized_readback-static)
if readelf -d "$work/pc_static" | grep -q libsized_readback; then echo "test-packages: pc_static links the .so" >&2; fail=1; fi
check "pkg-config sized_readback-static" "$work/pc_static"
# shellcheck disable=SC2046
"$cc" -std=c99 "${strict[@]}" -o "$work/pc_shared" "$src/consumer.c" $(pkg-config --cflags --libs sized_readback)
check "pkg-config sized_readback (shared, LD_LIBRARY_PATH)" "$work/pc_shared" LD_LIBRARY_PATH="$prefix/lib"

# 3. plain commands
"$cc" -std=c99 "${strict[@]}" -o "$work/cc_static" "$src/consumer.c" -I"$prefix/include" \
  "$prefix/lib/libsized_readback.a" -lpthread -ldl -lm -lrt
check "cc -std=c99 -pedantic" "$work/cc_static"
"$cxx" -std=c++17 "${strict[@]}" -o "$work/cxx_static" "$src/consumer.cpp" -I"$prefix/include" \
  "$prefix/lib/libsized_readback.a" -lpthread -ldl -lm -lrt
check "c++ -std=c++17 -pedantic" "$work/cxx_static"
cuda_inc=""
source "$root/scripts/find-nvcc.sh" 2>/dev/null || true
for d in "${CUDA_HOME:-/nonexistent}/include" /usr/local/cuda/include \
         "$(dirname "$(dirname "${NVCC:-/nonexistent/bin/nvcc}")")/include"; do
  [ -f "$d/cuda.h" ] && [ -f "$d/cuda_runtime_api.h" ] && { cuda_inc="$d"; break; }
done
if [ -n "$cuda_inc" ]; then
  "$cxx" -std=c++17 "${strict[@]}" -DSRB_WITH_CUDA_H -o "$work/cxx_cuda" "$src/consumer.cpp" -isystem "$cuda_inc" \
    -I"$prefix/include" "$prefix/lib/libsized_readback.a" -lpthread -ldl -lm -lrt
  check "c++ with <cuda.h> from $cuda_inc" "$work/cxx_cuda"
  "$cc" -std=c99 "${strict[@]}" -fsyntax-only -include cuda.h -isystem "$cuda_inc" -I"$prefix/include" "$src/consumer.c"
  echo "test-packages: cc with <cuda.h> included first: compiles"
else
  echo "test-packages: no CUDA toolkit headers found: skipped the <cuda.h> compatibility build"
fi
# 4. README.md's snippets (compile only), against the moved prefix.
bash "$root/scripts/test-readme-snippets.sh" "$prefix" || fail=1

[ $fail = 0 ] && echo "test-packages: all consumers and README snippets ok (prefix installed, moved, used)" || exit 1
