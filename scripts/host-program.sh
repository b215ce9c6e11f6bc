# Sourced by the scripts that build host programs on the C API (build-seed-capi.sh,
# build-seed-fortran.sh, build-mpi-exchange.sh): where the static library is, the seed
# programs' output check, and whether the programs can run here.

# srb_gpu_present: a driver the loader finds and a device nvidia-smi lists.
srb_gpu_present() {
  ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1
}

# srb_capi_lib NAME LIBDIR: sets `lib` to LIBDIR/libsized_readback.a. Builds it with cargo only
# where cargo puts it (target/release); a LIBDIR given without the library is a mistake to report.
srb_capi_lib() {
  local name=$1 dir=$2 root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  lib="$dir/libsized_readback.a"
  [ -f "$lib" ] && return 0
  [ "$dir" = "$root/target/release" ] || { echo "$name: no libsized_readback.a in $dir" >&2; return 1; }
  command -v cargo >/dev/null || { echo "$name: $lib is missing and there is no cargo" >&2; return 1; }
  (cd "$root" && cargo build --release --locked -p sized-readback-clib)
}

# srb_run_seed NAME EXE: runs a port of the seed and compares what it prints (less the kernel's
# "in kernel:" lines) with examples/seed_capi.expected.
srb_run_seed() {
  local name=$1 exe=$2 root log
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  log="$(mktemp)"
  "$exe" | tee "$log"
  if grep -v '^in kernel:' "$log" | diff -u "$root/examples/seed_capi.expected" -; then
    echo "$name: output matches the seed's expected output ($(wc -l < "$root/examples/seed_capi.expected") lines)"
    rm -f "$log"
  else
    echo "$name: OUTPUT DIFFERS from examples/seed_capi.expected" >&2
    rm -f "$log"
    return 1
  fi
}
