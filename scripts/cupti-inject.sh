# cupti-inject.sh: sourced by the scripts that inject a CUPTI library into a process
# (bfs-host-syncs.sh, cupti-trace.sh). Defines cupti_inject_lib SOURCE NAME OUTDIR: sets
# CUPTI_LIB (the injection library) and CUPTI_LIBDIR (where libcupti.so is), from
# $SRB_CUPTI_DIR/NAME (built beforehand, with libcupti.so.* beside it) if that exists, else
# by building SOURCE with gcc against the CUDA toolkit's CUPTI into OUTDIR/NAME.
# Run a command with them: CUDA_INJECTION64_PATH="$CUPTI_LIB" LD_LIBRARY_PATH="$CUPTI_LIBDIR:..."
cupti_inject_lib() {
  local src="$1" name="$2" outdir="$3"
  if [ -n "${SRB_CUPTI_DIR:-}" ] && [ -f "$SRB_CUPTI_DIR/$name" ]; then
    CUPTI_LIB="$(cd "$SRB_CUPTI_DIR" && pwd)/$name"
    CUPTI_LIBDIR="$(dirname "$CUPTI_LIB")"
    return 0
  fi
  local cuda inc
  cuda="$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")")"
  inc="$(dirname "$(find "$cuda" /usr/local/cuda* -name cupti.h 2>/dev/null | head -n 1)")"
  CUPTI_LIBDIR="$(dirname "$(find "$cuda" /usr/local/cuda* -name 'libcupti.so*' 2>/dev/null | head -n 1)")"
  CUPTI_LIB="$outdir/$name"
  gcc -shared -fPIC -O2 -I"$cuda/include" -I"$inc" "$src" -L"$CUPTI_LIBDIR" -lcupti -o "$CUPTI_LIB" \
    || { echo "cupti-inject: could not build $name from $src" >&2; return 2; }
}
