// The reverse-mode core and its differentiable operations.
#pragma once
#include "sinklab/autodiff/gradcheck.hpp"
#include "sinklab/autodiff/ops/elementwise.hpp"
#include "sinklab/autodiff/ops/linalg.hpp"
#include "sinklab/autodiff/ops/reduce.hpp"
#include "sinklab/autodiff/ops/shape.hpp"
#include "sinklab/autodiff/ops/softmax.hpp"
#include "sinklab/autodiff/parameter.hpp"
#include "sinklab/autodiff/tape.hpp"
