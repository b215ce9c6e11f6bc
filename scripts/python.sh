#!/usr/bin/env bash
# The Python package (python/, import sized_readback):
#   bash scripts/python.sh install       # builds the extension (maturin, release) and pip-installs ./python
#   bash scripts/python.sh test [ARGS]   # pytest python/tests (GPU tests are skipped without a GPU)
#   bash scripts/python.sh wheel DIR     # an abi3 wheel (cp39-abi3, manylinux) into DIR, for other hosts
# It uses the active virtual environment (VIRTUAL_ENV or CONDA_PREFIX) or makes python/.venv/ in the
# repository, installing python3-venv through apt-get when Debian's python3 lacks it (as root,
# or with sudo). The build needs Rust, and neither nvcc nor libclang (the kernels are committed).
# The wheel is built with maturin's zig linker (ziglang from PyPI) for manylinux_2_28 (glibc 2.28:
# RHEL/Rocky 8 and newer) and checked with auditwheel.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
cmd="${1:-}"; [ -n "$cmd" ] || usage; shift

# The interpreter to install into and run with.
python_env() {
  if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then echo "$VIRTUAL_ENV/bin/python"; return; fi
  if [ -n "${CONDA_PREFIX:-}" ] && [ -x "$CONDA_PREFIX/bin/python" ]; then echo "$CONDA_PREFIX/bin/python"; return; fi
  local venv="$root/python/.venv"
  if [ ! -x "$venv/bin/python" ]; then
    local py; py="$(command -v python3 || true)"
    [ -n "$py" ] || { echo "python.sh: python3 is needed" >&2; exit 1; }
    if ! "$py" -c 'import ensurepip, venv' >/dev/null 2>&1; then
      echo "python.sh: installing python3-venv (Debian's python3 has no ensurepip without it)" >&2
      local sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
      $sudo_cmd apt-get update -qq >/dev/null && $sudo_cmd apt-get install -y -qq python3-venv python3-dev >/dev/null \
        || { echo "python.sh: could not install python3-venv" >&2; exit 1; }
    fi
    echo "python.sh: creating $venv" >&2
    "$py" -m venv "$venv"
  fi
  echo "$venv/bin/python"
}

build_tools() { # build_tools PY: maturin (pinned) for the build, its bin/ first on PATH (the PEP 517
  # backend runs the `maturin` executable by name)
  "$1" -m pip install -q --disable-pip-version-check "maturin==1.16.*"
  export PATH="$(dirname "$1"):$PATH"
}

case "$cmd" in
  install)
    py="$(python_env)"
    build_tools "$py"
    "$py" -m pip install -q --disable-pip-version-check pytest numpy
    # --no-build-isolation: build with the maturin just installed (pinned), not a fresh one.
    "$py" -m pip install --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps ./python
    "$py" -c 'import sized_readback as s; print("python.sh: installed sized_readback", s.__version__, "kernels", s.KERNEL_TARGETS)'
    ;;
  test)
    py="$(python_env)"
    "$py" -c 'import sized_readback' 2>/dev/null \
      || { echo "python.sh: sized_readback is not installed in $py: run 'bash scripts/python.sh install' first" >&2; exit 1; }
    "$py" -m pytest python/tests -rs "$@"
    ;;
  wheel)
    out="${1:-}"; [ -n "$out" ] || usage
    mkdir -p "$out"
    py="$(python_env)"
    build_tools "$py"
    "$py" -m pip install -q --disable-pip-version-check "ziglang==0.13.*" "auditwheel==6.*"
    # abi3-py39: one wheel for every CPython >= 3.9; it links no CUDA library (libcuda is loaded at
    # run time). Linked by zig against glibc 2.28's symbols, so it installs on manylinux_2_28.
    rm -f "$out"/sized_readback-*.whl
    "$py" -m maturin build --release --manifest-path python/Cargo.toml --out "$out" \
      --zig --compatibility manylinux_2_28
    whl="$(ls "$out"/sized_readback-*.whl)"
    report="$("$py" -m auditwheel show "$whl")"
    echo "$report"
    # auditwheel folds its lines; one line makes the verdict greppable.
    tr '\n' ' ' <<<"$report" | grep -q 'consistent with the following platform tag: "manylinux_2_28_x86_64"' \
      || { echo "python.sh: auditwheel does not place $whl at manylinux_2_28" >&2; exit 1; }
    ls -l "$whl"
    ;;
  *) usage ;;
esac
