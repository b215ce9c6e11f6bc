#!/usr/bin/env bash
# Builds and runs scripts/probes/sized_launch_probe.cu on the GPU host (issue 36's probe), with
# the cuBLAS body where cuBLAS's header and library are found (the toolkit's, or the pip wheel
# PyTorch brings), and the library's pack body against the staged C library (.gpu-capi/).
# Usage: bash scripts/probes/run-sized-launch-probe.sh OUTDIR [STEPS REPEATS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:?OUTDIR}"; shift
mkdir -p "$out"
source "$root/scripts/find-nvcc.sh"
flags=(-O3 -std=c++17 -arch=sm_90)
extra=()
cublas_inc=""; cublas_lib=""
for d in "$(dirname "$(dirname "$NVCC")")" /usr/local/cuda $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s) for p in nvidia.__path__ for s in ("cublas", "cu13", "cu12")))' 2>/dev/null); do
  [ -z "$cublas_inc" ] && [ -f "$d/include/cublas_v2.h" ] && cublas_inc="$d/include"
  for l in "$d/lib64" "$d/lib"; do
    [ -z "$cublas_lib" ] && ls "$l"/libcublas.so* >/dev/null 2>&1 && cublas_lib="$l"
  done
done
if [ -n "$cublas_inc" ] && [ -n "$cublas_lib" ]; then
  so="$(ls "$cublas_lib"/libcublas.so* | head -n 1)"
  extra+=(-DWITH_CUBLAS -I"$cublas_inc" "$so" -Xlinker -rpath="$cublas_lib")
  echo "cuBLAS: $cublas_inc, $so" | tee "$out/build.txt"
else
  echo "cuBLAS: not found (the gemm body is not built)" | tee "$out/build.txt"
fi
if [ -f "$root/.gpu-capi/libsized_readback.a" ]; then
  extra+=(-DWITH_SRB -I"$root/capi/include" -I"$root/include" "$root/.gpu-capi/libsized_readback.a" -lpthread -ldl -lm -lrt)
fi
"$NVCC" "${flags[@]}" "$root/scripts/probes/sized_launch_probe.cu" -o "$out/sized_launch_probe" "${extra[@]}" "${NVCC_LINK_FLAGS[@]}" 2>&1 | tee -a "$out/build.txt"
"$out/sized_launch_probe" "$@" 2>&1 | tee "$out/probe.txt"
