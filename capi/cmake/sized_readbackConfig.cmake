# CMake package config of the sized-readback C API.
#
#   find_package(sized_readback REQUIRED)
#   target_link_libraries(my_sim PRIVATE sized_readback::sized_readback)
#
# Point sized_readback_DIR (or CMAKE_PREFIX_PATH) at this cmake/ directory of a source tree
# whose library is built (`cargo build --release --lib`), or at <prefix>/lib/cmake/sized_readback
# after `scripts/install-capi.sh <prefix>`.
#
# Targets: sized_readback::static (libsized_readback.a), sized_readback::shared
# (libsized_readback.so, if present) and sized_readback::sized_readback (the static one). The
# library loads libcuda at run time (dlopen), so no CUDA library is linked; <cuda.h> comes from
# the CUDA toolkit (CUDAToolkit's include directory when CMake finds it).
get_filename_component(_srb_here "${CMAKE_CURRENT_LIST_DIR}" ABSOLUTE)
if(EXISTS "${_srb_here}/../Cargo.toml")
  get_filename_component(_srb_root "${_srb_here}/.." ABSOLUTE)
  set(_srb_include "${_srb_root}/include")
  set(_srb_libdir "${_srb_root}/target/release")
else()
  get_filename_component(_srb_prefix "${_srb_here}/../../.." ABSOLUTE)
  set(_srb_include "${_srb_prefix}/include")
  set(_srb_libdir "${_srb_prefix}/lib")
endif()

if(NOT EXISTS "${_srb_include}/sized_readback.h" OR NOT EXISTS "${_srb_libdir}/libsized_readback.a")
  set(sized_readback_FOUND FALSE)
  set(sized_readback_NOT_FOUND_MESSAGE
      "sized_readback.h or libsized_readback.a not found under ${_srb_include} / ${_srb_libdir} (run `cargo build --release --lib`)")
  return()
endif()

include(CMakeFindDependencyMacro)
find_dependency(Threads)
find_package(CUDAToolkit QUIET)
set(_srb_includes "${_srb_include}")
if(CUDAToolkit_FOUND)
  list(APPEND _srb_includes ${CUDAToolkit_INCLUDE_DIRS})
endif()

if(NOT TARGET sized_readback::static)
  add_library(sized_readback::static STATIC IMPORTED)
  set_target_properties(sized_readback::static PROPERTIES
    IMPORTED_LOCATION "${_srb_libdir}/libsized_readback.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_srb_includes}"
    INTERFACE_LINK_LIBRARIES "Threads::Threads;${CMAKE_DL_LIBS};m;rt")
  if(EXISTS "${_srb_libdir}/libsized_readback.so")
    add_library(sized_readback::shared SHARED IMPORTED)
    set_target_properties(sized_readback::shared PROPERTIES
      IMPORTED_LOCATION "${_srb_libdir}/libsized_readback.so"
      INTERFACE_INCLUDE_DIRECTORIES "${_srb_includes}")
  endif()
  add_library(sized_readback::sized_readback INTERFACE IMPORTED)
  set_target_properties(sized_readback::sized_readback PROPERTIES
    INTERFACE_LINK_LIBRARIES sized_readback::static)
endif()
set(sized_readback_FOUND TRUE)
