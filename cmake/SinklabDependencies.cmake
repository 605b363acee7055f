# Finds sinklab's dependencies (Debian: libeigen3-dev, libxsimd-dev, nlohmann-json3-dev,
# OpenMP from gcc) and
# gathers them in one INTERFACE target, sinklab::deps. Used by the build tree and by the
# installed package config alike.
if(TARGET sinklab::deps)
  return()
endif()

find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(OpenMP REQUIRED COMPONENTS CXX)
# Header-only; used by io/ (safetensors headers, JSONL logs).
find_package(nlohmann_json 3.9 REQUIRED CONFIG)

# xsimd is header-only; Debian's xsimd 8 CMake target links a non-existent 'xtl' library,
# so only its include directory is taken.
find_path(SINKLAB_XSIMD_INCLUDE_DIR xsimd/xsimd.hpp)
if(NOT SINKLAB_XSIMD_INCLUDE_DIR)
  message(FATAL_ERROR "sinklab: xsimd headers not found (Debian: apt-get install libxsimd-dev, "
                      "or run scripts/install-deps.sh)")
endif()

add_library(sinklab_deps INTERFACE IMPORTED GLOBAL)
target_include_directories(sinklab_deps INTERFACE ${SINKLAB_XSIMD_INCLUDE_DIR})
target_link_libraries(sinklab_deps INTERFACE Eigen3::Eigen OpenMP::OpenMP_CXX nlohmann_json::nlohmann_json)
add_library(sinklab::deps ALIAS sinklab_deps)
