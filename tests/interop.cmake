# The whole decoder against PyTorch, and a Hugging Face Llama import (tests/scripts/torch_parity.sh
# with tests/interop/torch_parity.cpp and scripts/sinklab_torch.py). Skipped (77) when no python3
# can import torch.
add_executable(torch_parity interop/torch_parity.cpp)
target_link_libraries(torch_parity PRIVATE sinklab_program)
foreach(case parity llama)
  add_test(NAME torch_${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/torch_parity.sh ${case} $<TARGET_FILE:torch_parity>
                   ${PROJECT_SOURCE_DIR}/scripts/sinklab_torch.py)
  set_tests_properties(torch_${case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS interop
                       ENVIRONMENT "OMP_NUM_THREADS=2")
endforeach()
