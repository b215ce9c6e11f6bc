#!/usr/bin/env bash
# Compiles the C, C++, Fortran and CUDA snippets of README.md (or of a guide chapter, given as
# MARKDOWN) against an installed C API prefix (cargo xtask install-capi PREFIX), so that the
# documented code keeps compiling as the API changes.
# Compile only (-c): nothing is linked or run. Called by `cargo xtask packages`; the README's
# Rust blocks are doctests (src/lib.rs, ReadmeDoctests) and its Python blocks are run by
# python/tests/test_readme.py.
#
# Usage: bash xtask/scripts/test-readme-snippets.sh PREFIX [MARKDOWN]   (MARKDOWN: default README.md)
#        bash xtask/scripts/test-readme-snippets.sh --list [MARKDOWN]   (prints the snippets it finds)
#
# The rule, fixed:
# - A snippet is a fenced block whose info string is exactly `c`, `cpp`, `fortran` or `cuda`, in
#   any section. `c` is compiled as C99 and as C++17 (the header promises both), `cpp` as
#   C++17, `fortran` as Fortran 2018 with the installed module (share/sized_readback/fortran/),
#   `cuda` with nvcc (-std=c++17), and only where an nvcc is found (scripts/find-nvcc.sh), else
#   skipped with a message; a `cuda` snippet that includes <mpi.h> is compiled with
#   `-ccbin mpicxx` (the MPI C++ bindings left out), and skipped without mpicxx. Other tags (sh, text, cmake, python, rust...)
#   are not snippets.
# - Setup a snippet needs but does not show (its variables' declarations, say) sits in an HTML
#   comment right before its fence (blank lines between are allowed), which renders as nothing:
#       <!-- snippet-context
#       size_t cap = 1 << 20;
#       -->
# - A C, C++ or CUDA snippet is a fragment unless it has a line that starts with `__global__`,
#   `extern "C" __global__` or `int main`: then it is a whole file, compiled after its context.
#   A fragment becomes: its preprocessor lines (#include ...), the context (at file scope), then
#   `int main(void) {` the rest `return 0; }`.
# - A Fortran snippet is a fragment unless it starts with `program` or `module`. A fragment
#   becomes: `program readme_snippet`, its `use` lines, `implicit none`, the context (the
#   declarations it needs), the rest, `end program readme_snippet`.
# Flags: C and C++ -Wall -Wextra -Werror -pedantic (less unused-variable warnings: fragments
# compute values they do not use); Fortran -std=f2018 -Wall -Werror (less unused and
# uninitialized warnings: a fragment's variables get their values elsewhere).
# Environment: CC, CXX, FC (default cc, c++, gfortran), NVCC, MPICXX (default mpicxx). Under
# SRB_CI=1 a missing C, C++ or Fortran compiler is an error; otherwise it is skipped with a message.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
usage="usage: bash xtask/scripts/test-readme-snippets.sh PREFIX [MARKDOWN] | --list [MARKDOWN]"
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "$usage" >&2; exit 2; }
list=0
prefix=""
case "$1" in
  -h|--help) echo "$usage"; exit 0 ;;
  --list) list=1 ;;
  *) [ -d "$1" ] || { echo "test-readme-snippets: no prefix $1 (cargo xtask install-capi $1)" >&2; exit 2; }
     prefix="$(cd "$1" && pwd)" ;;
esac
md="${2:-$root/README.md}"
[ -f "$md" ] || { echo "test-readme-snippets: no $md" >&2; exit 2; }
name="$(basename "$md")"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Extraction: NNN-L<line>.<tag> holds the snippet (dedented by its fence's indentation) and
# NNN-L<line>.<tag>.ctx its context (empty if none).
awk -v dir="$work" '
  function flush_ctx() { ctx = ""; have_ctx = 0 }
  BEGIN { n = 0; in_fence = 0; in_ctx = 0; flush_ctx() }
  in_fence {
    if ($0 ~ /^[ \t]*```[ \t]*$/) {
      if (tag == "c" || tag == "cpp" || tag == "fortran" || tag == "cuda") {
        n++
        f = sprintf("%s/%03d-L%d.%s", dir, n, start, tag)
        printf "%s", body > f; close(f)
        printf "%s", (use_ctx ? ctx : "") > (f ".ctx"); close(f ".ctx")
      }
      in_fence = 0; flush_ctx(); next
    }
    line = $0
    if (substr(line, 1, indent) ~ /^[ \t]*$/) line = substr(line, indent + 1)
    body = body line "\n"; next
  }
  in_ctx {
    if ($0 ~ /^[ \t]*-->[ \t]*$/) { in_ctx = 0; have_ctx = 1; next }
    ctx = ctx $0 "\n"; next
  }
  /^[ \t]*<!-- snippet-context[ \t]*$/ { in_ctx = 1; ctx = ""; next }
  /^[ \t]*```/ {
    match($0, /^[ \t]*/); indent = RLENGTH
    tag = substr($0, indent + 4); gsub(/^[ \t]+|[ \t]+$/, "", tag)
    in_fence = 1; body = ""; start = NR; use_ctx = have_ctx; next
  }
  /[^ \t]/ { flush_ctx() }
  END {
    if (in_fence) { print "test-readme-snippets: a fence opened at line " start " is never closed" > "/dev/stderr"; exit 1 }
    if (in_ctx) { print "test-readme-snippets: an unclosed snippet-context comment" > "/dev/stderr"; exit 1 }
  }
' "$md"

shopt -s nullglob
snippets=("$work"/[0-9]*-L*.c "$work"/[0-9]*-L*.cpp "$work"/[0-9]*-L*.fortran "$work"/[0-9]*-L*.cuda)
[ ${#snippets[@]} -gt 0 ] || { echo "test-readme-snippets: no c, cpp, fortran or cuda snippet in $md" >&2; exit 1; }
mapfile -t snippets < <(printf '%s\n' "${snippets[@]}" | sort)

line_of() { local b; b="$(basename "$1")"; b="${b#*-L}"; echo "${b%%.*}"; }
tag_of() { echo "${1##*.}"; }

if [ $list = 1 ]; then
  for s in "${snippets[@]}"; do
    echo "== $name line $(line_of "$s"): $(tag_of "$s")$([ -s "$s.ctx" ] && echo ", with a snippet-context")"
    cat "$s"
  done
  exit 0
fi

cc="${CC:-cc}" cxx="${CXX:-c++}" fc="${FC:-gfortran}" mpicxx="${MPICXX:-mpicxx}"
cflags=(-Wall -Wextra -Werror -pedantic -Wno-unused-variable -Wno-unused-but-set-variable)
fflags=(-std=f2018 -Wall -Werror -Wno-unused-variable -Wno-unused-dummy-argument -Wno-uninitialized -Wno-maybe-uninitialized)
inc=(-I"$prefix/include")
have() { command -v "$1" >/dev/null; }
need() { # need TOOL WHAT: 0 if TOOL is here; else skipped (1), or an error under SRB_CI=1
  have "$1" && return 0
  if [ "${SRB_CI:-0}" = 1 ]; then echo "test-readme-snippets: no $1 for $2 (SRB_CI=1)" >&2; exit 1; fi
  echo "test-readme-snippets: no $1 here: skipped $2"; return 1
}
nvcc_found=""
if (source "$root/scripts/find-nvcc.sh" >/dev/null 2>&1 && echo "$NVCC" >"$work/nvcc"); then nvcc_found="$(cat "$work/nvcc")"; fi

# C-family wrapper: preprocessor lines first, then the context, then the rest in main (or the
# whole snippet after the context, for a file).
wrap_c() { # wrap_c SNIPPET OUT
  local s=$1 out=$2
  {
    echo "/* $name line $(line_of "$s") ($(tag_of "$s")), wrapped by xtask/scripts/test-readme-snippets.sh */"
    if grep -Eq '^(extern "C" +)?__global__|^int main' "$s"; then
      cat "$s.ctx" "$s"
    else
      grep -E '^[[:space:]]*#' "$s" || true
      cat "$s.ctx"
      echo "int main(void) {"
      grep -Ev '^[[:space:]]*#' "$s" || true
      echo "return 0;"
      echo "}"
    fi
  } >"$out"
}
wrap_fortran() { # wrap_fortran SNIPPET OUT
  local s=$1 out=$2
  if grep -Eiq '^[[:space:]]*(program|module)[[:space:]]' "$s"; then
    cat "$s.ctx" "$s" >"$out"; return
  fi
  {
    echo "! $name line $(line_of "$s") (fortran), wrapped by xtask/scripts/test-readme-snippets.sh"
    echo "program readme_snippet"
    grep -Ei '^[[:space:]]*use[[:space:],]' "$s" || true
    echo "implicit none"
    cat "$s.ctx"
    grep -Eiv '^[[:space:]]*use[[:space:],]' "$s" || true
    echo "end program readme_snippet"
  } >"$out"
}

fail=0 done_n=0 skipped=0
compile() { # compile LABEL COMMAND...: runs it, prints the source and the error on failure
  local label=$1 src=${*: -1} log="$work/log"
  shift
  if "$@" >"$log" 2>&1; then
    echo "test-readme-snippets: $label: compiles"; done_n=$((done_n + 1))
  else
    echo "test-readme-snippets: $label: FAILED: $*" >&2
    cat -n "$src" >&2; cat "$log" >&2; fail=1
  fi
}

fmod_ready=0
mkdir -p "$work/fmod-out"
for s in "${snippets[@]}"; do
  tag="$(tag_of "$s")" line="$(line_of "$s")"
  label="$name line $line ($tag)"
  base="$work/snippet-L$line"
  case "$tag" in
    c)
      wrap_c "$s" "$base.c"
      if need "$cc" "$label as C"; then
        compile "$label as C99" "$cc" -std=c99 "${cflags[@]}" "${inc[@]}" -c -o "$base-c.o" "$base.c"
      else skipped=$((skipped + 1)); fi
      cp "$base.c" "$base.cpp"
      if need "$cxx" "$label as C++"; then
        compile "$label as C++17" "$cxx" -std=c++17 "${cflags[@]}" "${inc[@]}" -c -o "$base-cpp.o" "$base.cpp"
      else skipped=$((skipped + 1)); fi
      ;;
    cpp)
      wrap_c "$s" "$base.cpp"
      if need "$cxx" "$label"; then
        compile "$label as C++17" "$cxx" -std=c++17 "${cflags[@]}" "${inc[@]}" -c -o "$base.o" "$base.cpp"
      else skipped=$((skipped + 1)); fi
      ;;
    fortran)
      wrap_fortran "$s" "$base.f90"
      if need "$fc" "$label"; then
        if [ $fmod_ready = 0 ]; then
          # The module as a consumer gets it: its installed source, compiled here (-J: its .mod).
          "$fc" -std=f2018 -J "$work" -c "$prefix/share/sized_readback/fortran/sized_readback.f90" \
            -o "$work/sized_readback_mod.o"
          fmod_ready=1
        fi
        compile "$label" "$fc" "${fflags[@]}" -I"$work" -J "$work/fmod-out" -c -o "$base.o" "$base.f90"
      else skipped=$((skipped + 1)); fi
      ;;
    cuda)
      wrap_c "$s" "$base.cu"
      if [ -z "$nvcc_found" ]; then
        echo "test-readme-snippets: $label: skipped (no nvcc: install the CUDA toolkit, set NVCC, or run cargo xtask dev-env)"
        skipped=$((skipped + 1)); continue
      fi
      ccbin=()
      if grep -q '#include <mpi.h>' "$base.cu"; then
        if ! have "$mpicxx"; then
          echo "test-readme-snippets: $label: skipped (it uses MPI and there is no $mpicxx)"
          skipped=$((skipped + 1)); continue
        fi
        # Open MPI's and MPICH's C++ bindings (unused here) do not build warning-free.
        ccbin=(-ccbin "$mpicxx" -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX)
      fi
      compile "$label with nvcc${ccbin[1]:+ -ccbin ${ccbin[1]}}" "$nvcc_found" -std=c++17 "${ccbin[@]}" \
        -Xcompiler -Wall,-Wextra,-Werror,-Wno-unused-variable,-Wno-unused-but-set-variable \
        "${inc[@]}" -c -o "$base.o" "$base.cu"
      ;;
  esac
done
echo "test-readme-snippets: $name: ${#snippets[@]} snippets, $done_n compilations ok, $skipped skipped"
[ $fail = 0 ] || { echo "test-readme-snippets: some README snippets do not compile (see above)" >&2; exit 1; }
