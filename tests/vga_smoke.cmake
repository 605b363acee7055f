# Smoke test of examples/vga_bigram_backcopy: a few steps on tiny sizes with the program's
# built-in text (--smoke; no network, no Brown corpus), then tests/vga_smoke/check.cmake checks
# that every output exists, the logs have the expected rows and every metric is finite.
if(SINKLAB_BUILD_EXAMPLES)
  find_program(SINKLAB_GNUPLOT gnuplot)
  if(SINKLAB_GNUPLOT)
    set(_vga_expect_plots ON)
  else()
    set(_vga_expect_plots OFF)
  endif()
  add_test(NAME vga_bigram_backcopy_smoke
    COMMAND ${CMAKE_COMMAND}
      -DEXE=$<TARGET_FILE:vga_bigram_backcopy>
      -DOUT=${CMAKE_CURRENT_BINARY_DIR}/vga_smoke
      -DEXPECT_PLOTS=${_vga_expect_plots}
      -P ${CMAKE_CURRENT_SOURCE_DIR}/vga_smoke/check.cmake)
  set_tests_properties(vga_bigram_backcopy_smoke PROPERTIES TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
