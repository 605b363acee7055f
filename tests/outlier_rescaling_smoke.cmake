# Smoke test of examples/outlier_rescaling: the --smoke preset (a tiny decoder, a few steps of
# every variant on built-in sentences: no network, no Brown corpus), then
# tests/outlier_rescaling_smoke/check.cmake checks the outputs, the paired starts, divergence
# handling, --resume and the error messages.
if(SINKLAB_BUILD_EXAMPLES)
  add_test(NAME outlier_rescaling_smoke
    COMMAND ${CMAKE_COMMAND}
      -DEXE=$<TARGET_FILE:outlier_rescaling>
      -DOUT=${CMAKE_CURRENT_BINARY_DIR}/outlier_rescaling_smoke
      -P ${CMAKE_CURRENT_SOURCE_DIR}/outlier_rescaling_smoke/check.cmake)
  set_tests_properties(outlier_rescaling_smoke PROPERTIES LABELS example TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
