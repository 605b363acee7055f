# Data-parallel training on 2 MPI ranks (tests/scripts/dist_mpi.sh): data-parallel equals one
# process with the global batch, the run matrix spread over ranks equals the sequential one, an
# interrupted data-parallel run resumes on every rank to the same bits, and a rank that dies or
# fails ends the job with its rank named instead of a hang. Skipped (77) without MPI.
add_executable(dist_train dist/dist_train.cpp)
target_link_libraries(dist_train PRIVATE sinklab_program sinklab::mpi)
foreach(case data_parallel run_matrix resume rank_killed rank_fails)
  add_test(NAME dist_mpi_${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/dist_mpi.sh ${case} $<TARGET_FILE:dist_train>
                   "${SINKLAB_HAVE_MPI}" "${MPIEXEC_EXECUTABLE}")
  set_tests_properties(dist_mpi_${case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS dist
                       ENVIRONMENT "OMP_NUM_THREADS=1")
endforeach()
