# Smoke run of examples/compose/ (a few tiny steps of every variant on the built-in text).
if(SINKLAB_BUILD_EXAMPLES)
  add_test(NAME compose_smoke COMMAND compose --smoke)
  set_tests_properties(compose_smoke PROPERTIES LABELS example TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
# The same on the GPU (`--device cuda`, examples/compose/models_cuda.cu): skipped where there is no
# GPU, after checking that the example says so and exits 1 (tests/scripts/on_gpu.sh).
if(SINKLAB_BUILD_EXAMPLES AND SINKLAB_HAVE_CUDA)
  add_test(NAME compose_cuda_smoke COMMAND bash ${PROJECT_SOURCE_DIR}/tests/scripts/on_gpu.sh $<TARGET_FILE:compose>
                                           --smoke --device cuda)
  set_tests_properties(compose_cuda_smoke PROPERTIES LABELS example TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
