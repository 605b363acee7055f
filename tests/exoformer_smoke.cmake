# Smoke test of examples/exoformer: the --smoke preset (a tiny decoder, a few steps of every
# variant on built-in sentences: no network, no Brown corpus), then
# tests/exoformer_smoke/check.cmake checks the outputs, the paired starts, the mixing
# coefficients, --resume and the error messages.
if(SINKLAB_BUILD_EXAMPLES)
  add_test(NAME exoformer_smoke
    COMMAND ${CMAKE_COMMAND}
      -DEXE=$<TARGET_FILE:exoformer>
      -DOUT=${CMAKE_CURRENT_BINARY_DIR}/exoformer_smoke
      -P ${CMAKE_CURRENT_SOURCE_DIR}/exoformer_smoke/check.cmake)
  set_tests_properties(exoformer_smoke PROPERTIES LABELS example TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
