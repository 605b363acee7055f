# The include graph obeys the layering (scripts/check-layering.sh), and the check itself fails
# on a header that breaks it (written to scratch trees): a policy header including nn/, an op
# including a CPU kernel header, an op calling kernels::cpu instead of kernels::backend<Device>,
# an op looping over a tensor's data itself.
add_test(NAME layering COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layering.sh ${PROJECT_SOURCE_DIR})

set(_bad ${CMAKE_CURRENT_BINARY_DIR}/layering_violation)
file(WRITE ${_bad}/include/sinklab/policy/bad.hpp "#include \"sinklab/nn/attention.hpp\"\n")
add_test(NAME layering_catches_violation COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layering.sh ${_bad})
set_tests_properties(layering_catches_violation PROPERTIES WILL_FAIL TRUE)

set(_bad_include ${CMAKE_CURRENT_BINARY_DIR}/layering_op_includes_cpu)
file(WRITE ${_bad_include}/include/sinklab/autodiff/ops/bad.hpp "#include \"sinklab/kernels/cpu/gemm.hpp\"\n")
add_test(NAME layering_catches_op_including_cpu_kernels
         COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layering.sh ${_bad_include})
set_tests_properties(layering_catches_op_including_cpu_kernels PROPERTIES WILL_FAIL TRUE)

set(_bad_call ${CMAKE_CURRENT_BINARY_DIR}/layering_op_calls_cpu)
file(WRITE ${_bad_call}/include/sinklab/autodiff/ops/bad.hpp
     "#include \"sinklab/kernels/backend.hpp\"\ninline void f() { sinklab::kernels::cpu::gemm(); }  // a call\n")
add_test(NAME layering_catches_op_calling_cpu_kernels
         COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layering.sh ${_bad_call})
set_tests_properties(layering_catches_op_calling_cpu_kernels PROPERTIES WILL_FAIL TRUE)

set(_bad_loop ${CMAKE_CURRENT_BINARY_DIR}/layering_op_loops)
file(WRITE ${_bad_loop}/include/sinklab/autodiff/ops/bad.hpp
     "#include \"sinklab/kernels/backend.hpp\"\ntemplate <class X> void f(X& t) { t.data()[0] = 1; }\n")
add_test(NAME layering_catches_op_looping_over_data
         COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layering.sh ${_bad_loop})
set_tests_properties(layering_catches_op_looping_over_data PROPERTIES WILL_FAIL TRUE)
