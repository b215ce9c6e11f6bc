#!/usr/bin/env bash
# Source or run this to get the two tools that only the maintainers' checks need; building the
# library, its tests, the seed, the C library and the Python package needs Rust alone.
# - libclang-dev through apt-get (as root, or with sudo): bindgen in `cargo xtask regen`;
# - nvcc 13.0 from PyPI into .venv-nvcc/ in the crate root, when no nvcc is found: the host
#   programs written in CUDA C++ (examples/seed_capi.cu, mpi_exchange.cu, seed_fortran_kernel.cu).
# It installs only what is missing, exports NVCC, and unsets a LIBCLANG_PATH that holds no
# libclang. Re-running is cheap. Sourcing it changes no shell option of the caller.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

source "$root/scripts/libclang.sh"
if ! have_libclang; then
  echo "dev-env: installing libclang-dev (bindgen, for cargo xtask regen)" >&2
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq >/dev/null && $sudo_cmd apt-get install -y -qq libclang-dev >/dev/null \
    || { echo "dev-env: could not install libclang-dev" >&2; return 1 2>/dev/null || exit 1; }
fi

# scripts/find-nvcc.sh holds the search (NVCC, CUDA_HOME, PATH, /usr/local/cuda, an active
# environment's wheel, .venv-nvcc) and sets NVCC when it finds one.
if ! source "$root/scripts/find-nvcc.sh" 2>/dev/null; then
  echo "dev-env: no nvcc found; installing nvcc 13.0 from PyPI into $root/.venv-nvcc (for the CUDA C++ host programs; about 280 MB on disk, once)" >&2
  py="$(command -v python3 || true)"
  [ -n "$py" ] || { echo "dev-env: python3 is needed to install nvcc" >&2; return 1 2>/dev/null || exit 1; }
  "$py" -m venv "$root/.venv-nvcc" \
    && "$root/.venv-nvcc/bin/pip" install -q --disable-pip-version-check \
         nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96 \
    || { echo "dev-env: pip install of nvcc failed" >&2; return 1 2>/dev/null || exit 1; }
  source "$root/scripts/find-nvcc.sh" 2>/dev/null \
    || { echo "dev-env: nvcc still not found after the install" >&2; return 1 2>/dev/null || exit 1; }
fi
echo "dev-env: NVCC=$NVCC" >&2
