# cmake -P driver for the downstream-consumer tests (see tests/downstream.cmake).
#   MODE=install       cmake --install the sinklab build tree into a fresh prefix, then build
#                      tests/downstream against it with find_package(sinklab CONFIG REQUIRED)
#   MODE=subdirectory  build tests/downstream with add_subdirectory(<sinklab source tree>)
# Then run the downstream program and check what it prints.
# Inputs: MODE, SINKLAB_SOURCE_DIR, SINKLAB_BINARY_DIR, WORK_DIR, GENERATOR, CXX_COMPILER,
#         CXX_LAUNCHER (may be empty).
cmake_minimum_required(VERSION 3.20)

foreach(var MODE SINKLAB_SOURCE_DIR SINKLAB_BINARY_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "downstream test: ${var} is not set")
  endif()
endforeach()

# Run a command; on failure print its output and stop the test.
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "downstream test (${MODE}): ${what} failed (exit ${rc})\n"
                        "command: ${ARGN}\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(build_dir "${WORK_DIR}/build")
set(configure_args -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(CXX_LAUNCHER)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER})
endif()

if(MODE STREQUAL "install")
  set(prefix "${WORK_DIR}/prefix")
  run_step("cmake --install" ${CMAKE_COMMAND} --install "${SINKLAB_BINARY_DIR}" --prefix "${prefix}")
  foreach(f include/sinklab/core/tensor.hpp include/sinklab/cuda/device.cuh
            share/cmake/sinklab/sinklabConfig.cmake
            share/cmake/sinklab/sinklabConfigVersion.cmake share/cmake/sinklab/sinklabTargets.cmake)
    if(NOT EXISTS "${prefix}/${f}")
      message(FATAL_ERROR "downstream test (install): ${prefix}/${f} was not installed")
    endif()
  endforeach()
  list(APPEND configure_args -DCMAKE_PREFIX_PATH=${prefix}
       # Only the fresh prefix may satisfy find_package(sinklab): never a build tree or
       # another install registered elsewhere.
       -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
elseif(MODE STREQUAL "subdirectory")
  list(APPEND configure_args -DSINKLAB_SOURCE_DIR=${SINKLAB_SOURCE_DIR} -DSINKLAB_CUDA=OFF
       -DSINKLAB_BUILD_TESTS=OFF -DSINKLAB_BUILD_EXAMPLES=OFF -DSINKLAB_BUILD_BENCH=OFF)
else()
  message(FATAL_ERROR "downstream test: unknown MODE '${MODE}' (expected install or subdirectory)")
endif()

run_step("configure" ${CMAKE_COMMAND} -S "${SINKLAB_SOURCE_DIR}/tests/downstream" -B "${build_dir}"
         ${configure_args})
if(MODE STREQUAL "install")
  # The package must come from the prefix, not from the source or build tree.
  string(REGEX MATCH "found sinklab [^\n]* in [^\n]*" found_line "${step_output}")
  if(NOT found_line MATCHES "in ${prefix}/")
    message(FATAL_ERROR "downstream test (install): sinklab was not found in ${prefix}:\n${step_output}")
  endif()
  message(STATUS "${found_line}")
endif()
run_step("build" ${CMAKE_COMMAND} --build "${build_dir}")
run_step("run" "${build_dir}/downstream")
message(STATUS "${step_output}")
if(NOT step_output MATCHES "sinklab downstream OK")
  message(FATAL_ERROR "downstream test (${MODE}): unexpected output:\n${step_output}")
endif()
if(MODE STREQUAL "subdirectory")
  run_step("run" "${build_dir}/downstream_precompiled")
  message(STATUS "${step_output}")
  if(NOT step_output MATCHES "sinklab downstream precompiled OK")
    message(FATAL_ERROR "downstream test (subdirectory): unexpected output of downstream_precompiled:\n${step_output}")
  endif()
endif()
if(EXISTS "${build_dir}/downstream_mpi")
  run_step("run" "${build_dir}/downstream_mpi")
  message(STATUS "${step_output}")
  if(NOT step_output MATCHES "downstream_mpi: 1 rank\\(s\\) \\(single\\), loss 12, gradient 4")
    message(FATAL_ERROR "downstream test (${MODE}): unexpected output of downstream_mpi:\n${step_output}")
  endif()
endif()
