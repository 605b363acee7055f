# The include graph obeys the layering (scripts/check-layering.sh), and the check itself fails on
# each kind of header that breaks it, written to a scratch tree of its own.
add_test(NAME layering COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layering.sh ${PROJECT_SOURCE_DIR})

# layering_catches_<what>: a tree holding include/sinklab/<header> with `content` must fail the check.
function(sinklab_layering_violation what header content)
  set(tree ${CMAKE_CURRENT_BINARY_DIR}/layering_${what})
  file(WRITE ${tree}/include/sinklab/${header} "${content}")
  add_test(NAME layering_catches_${what} COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layering.sh ${tree})
  set_tests_properties(layering_catches_${what} PROPERTIES WILL_FAIL TRUE)
endfunction()

# a policy header including nn/
sinklab_layering_violation(violation policy/bad.hpp "#include \"sinklab/nn/attention.hpp\"\n")
# an op including a CPU kernel header instead of kernels/<device>/backend.hpp
sinklab_layering_violation(op_including_cpu_kernels autodiff/ops/bad.hpp "#include \"sinklab/kernels/cpu/gemm.hpp\"\n")
# an op calling kernels::cpu instead of kernels::backend<Device>
sinklab_layering_violation(op_calling_cpu_kernels autodiff/ops/bad.hpp
                           "#include \"sinklab/kernels/backend.hpp\"\ninline void f() { sinklab::kernels::cpu::gemm(); }  // a call\n")
# an op looping over a tensor's data itself
sinklab_layering_violation(op_looping_over_data autodiff/ops/bad.hpp
                           "#include \"sinklab/kernels/backend.hpp\"\ntemplate <class X> void f(X& t) { t.data()[0] = 1; }\n")

# Every repository path a comment or a doc names is there (scripts/check-references.sh), and the
# check fails on a doc that names a missing one.
add_test(NAME references COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-references.sh ${PROJECT_SOURCE_DIR})
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/references_missing/docs/page.md "See docs/missing.md and nn/gone.hpp.\n")
add_test(NAME references_catch_a_missing_file
         COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-references.sh ${CMAKE_CURRENT_BINARY_DIR}/references_missing)
set_tests_properties(references_catch_a_missing_file PROPERTIES PASS_REGULAR_EXPRESSION
                     "names docs/missing\\.md, which is not in the repository\ndocs/page\\.md: names nn/gone\\.hpp")
