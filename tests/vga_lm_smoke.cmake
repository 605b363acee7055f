# Smoke test of examples/vga_lm: the --smoke preset (tiny models, a few steps of every variant
# of both families, on built-in sentences: no network, no Brown corpus), then
# tests/vga_lm_smoke/check.cmake checks the outputs, the paired starts, the retrofit's exact
# start, --resume and the error messages.
if(SINKLAB_BUILD_EXAMPLES)
  add_test(NAME vga_lm_smoke
    COMMAND ${CMAKE_COMMAND}
      -DEXE=$<TARGET_FILE:vga_lm>
      -DOUT=${CMAKE_CURRENT_BINARY_DIR}/vga_lm_smoke
      -P ${CMAKE_CURRENT_SOURCE_DIR}/vga_lm_smoke/check.cmake)
  set_tests_properties(vga_lm_smoke PROPERTIES LABELS example TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
