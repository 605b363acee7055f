// The cpu's results of backend_cases.hpp, built by the host compiler for test_cuda_backend.
#include "backend_cases.hpp"

namespace backend_cases {
template Results<float> every_op<float, cpu>();
template Results<double> every_op<double, cpu>();
template Results<float> every_attention<float, cpu>();
template Results<double> every_attention<double, cpu>();
template std::vector<float> train_block<float, cpu>(int);
template std::vector<double> train_block<double, cpu>(int);
}  // namespace backend_cases
