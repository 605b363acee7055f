# MPI for data-parallel training (include/sinklab/dist/mpi.hpp): SINKLAB_MPI=AUTO uses it when
# found (Debian: libopenmpi-dev), ON requires it, OFF leaves it out. sinklab::mpi always exists
# so that programs can link it unconditionally; without MPI it adds nothing and dist::world()
# is the single-process communicator.
add_library(sinklab_mpi INTERFACE)
add_library(sinklab::mpi ALIAS sinklab_mpi)
target_link_libraries(sinklab_mpi INTERFACE sinklab::sinklab)
set(SINKLAB_HAVE_MPI OFF)
if(NOT SINKLAB_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    target_link_libraries(sinklab_mpi INTERFACE MPI::MPI_CXX)
    target_compile_definitions(sinklab_mpi INTERFACE SINKLAB_HAVE_MPI)
    set(SINKLAB_HAVE_MPI ON)
    message(STATUS "sinklab: MPI ON (MPI ${MPI_CXX_VERSION}; launcher ${MPIEXEC_EXECUTABLE})")
  elseif(SINKLAB_MPI STREQUAL "ON")
    message(FATAL_ERROR "sinklab: SINKLAB_MPI=ON but no MPI was found (Debian: apt-get install libopenmpi-dev "
                        "openmpi-bin, or run scripts/install-deps.sh)")
  else()
    message(STATUS "sinklab: MPI not found; data-parallel runs over processes OFF (SINKLAB_MPI=AUTO)")
  endif()
endif()
