# Smoke test of examples/vit_sinks: the --smoke preset (a tiny ViT, a few steps of all four
# variants on built-in synthetic images: no Fashion-MNIST needed), then
# tests/vit_sinks_smoke/check.cmake checks the outputs, the paired starts, the dense probe, the
# attention maps, --resume and the error messages.
if(SINKLAB_BUILD_EXAMPLES)
  add_test(NAME vit_sinks_smoke
    COMMAND ${CMAKE_COMMAND}
      -DEXE=$<TARGET_FILE:vit_sinks>
      -DOUT=${CMAKE_CURRENT_BINARY_DIR}/vit_sinks_smoke
      -P ${CMAKE_CURRENT_SOURCE_DIR}/vit_sinks_smoke/check.cmake)
  set_tests_properties(vit_sinks_smoke PROPERTIES LABELS example TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
