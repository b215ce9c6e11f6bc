# The one nvcc finder. Sourced by the scripts that build host programs with nvcc (seed_capi,
# seed_fortran, mpi_exchange; on the GPU host too) and used by `cargo xtask dev-env`: sets
# NVCC to a working nvcc (NVCC, CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda, a conda
# environment's, the nvidia-cuda-nvcc wheel of an active Python environment or of .venv-nvcc)
# and NVCC_LINK_FLAGS to what its CUDA runtime libraries need (the wheel keeps
# libcudart_static.a in its lib/, not where nvcc looks), and CUDART_LIBDIR to the directory of
# libcudart_static.a for other linkers.
_srb_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_srb_try() { [ -n "$1" ] && [ -x "$1" ] && "$1" --version >/dev/null 2>&1; }
if ! _srb_try "${NVCC:-}"; then
  NVCC=""
  for c in "${CUDA_HOME:-/nonexistent}/bin/nvcc" "${CUDA_PATH:-/nonexistent}/bin/nvcc" \
           "$(command -v nvcc 2>/dev/null || true)" /usr/local/cuda/bin/nvcc \
           "${CONDA_PREFIX:-/nonexistent}/bin/nvcc" \
           "${VIRTUAL_ENV:-/nonexistent}"/lib/python3*/site-packages/nvidia/cu13/bin/nvcc \
           "${CONDA_PREFIX:-/nonexistent}"/lib/python3*/site-packages/nvidia/cu13/bin/nvcc \
           "$_srb_root"/.venv-nvcc/lib/python3*/site-packages/nvidia/cu13/bin/nvcc; do
    if _srb_try "$c"; then NVCC="$c"; break; fi
  done
fi
if [ -z "$NVCC" ]; then
  echo "no working nvcc: install the CUDA toolkit, set NVCC=/path/to/nvcc, or run cargo xtask dev-env" >&2
  return 1 2>/dev/null || exit 1
fi
export NVCC
# The CUDA runtime's static library: beside the pip wheel's nvcc (lib/, where nvcc itself does
# not look), in a toolkit's lib64/ or targets/*/lib/; none found means a default library
# directory (Debian's nvidia-cuda-toolkit). CUDART_LIBDIR is that directory, for linkers other
# than nvcc (gfortran).
NVCC_LINK_FLAGS=()
CUDART_LIBDIR=""
_srb_nvcc_root="$(dirname "$(dirname "$NVCC")")"
for _srb_d in "$_srb_nvcc_root/lib64" "$_srb_nvcc_root/lib" "$_srb_nvcc_root"/targets/*/lib; do
  if [ -f "$_srb_d/libcudart_static.a" ]; then
    CUDART_LIBDIR="$_srb_d"
    NVCC_LINK_FLAGS=(-L"$_srb_d")
    break
  fi
done
unset _srb_d _srb_nvcc_root
unset -f _srb_try
