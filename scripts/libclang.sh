# Sourced by scripts/dev-env.sh (and tested by scripts/test-dev-env.sh): how to tell whether
# bindgen will find libclang, without running bindgen.
# bindgen (through clang-sys) loads libclang.so, libclang-*.so, libclang.so.* or libclang-*.so.*
# from LIBCLANG_PATH or the usual directories, and rejects libclang-cpp.so.* (the C++ library that
# clang-format and llvm-*-dev install without the real one). Look for what it will accept.
libclang_dir() { # libclang_dir DIR...: prints the first DIR that holds a libclang bindgen accepts
  local d f
  for d in "$@"; do
    for f in "$d"/libclang.so "$d"/libclang-*.so "$d"/libclang.so.* "$d"/libclang-*.so.*; do
      [ -e "$f" ] || continue
      case "${f##*/}" in libclang-cpp*) continue ;; esac
      echo "$d"; return 0
    done
  done
  return 1
}
have_libclang() {
  if [ -n "${LIBCLANG_PATH:-}" ]; then
    libclang_dir "$LIBCLANG_PATH" >/dev/null && return 0
    echo "dev-env: LIBCLANG_PATH=$LIBCLANG_PATH holds no libclang.so (libclang-cpp does not count); ignoring it" >&2
    unset LIBCLANG_PATH
  fi
  libclang_dir /usr/lib/llvm-*/lib /usr/lib/*-linux-gnu /usr/lib64 /usr/local/lib >/dev/null
}
