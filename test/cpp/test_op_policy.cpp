// aten/OpPolicy.h: the one table that says where an op runs and on which engine it costs time.
#include <gtest/gtest.h>

#include <string>

#include "aten/OpPolicy.h"

namespace {

using torch_neuron::classify_op;
using torch_neuron::OpClass;

TEST(OpPolicy, EnginesByFamily) {
  EXPECT_EQ(classify_op("aten::mm"), OpClass::Matmul);
  EXPECT_EQ(classify_op("aten::baddbmm"), OpClass::Matmul);
  EXPECT_EQ(classify_op("aten::baddbmm_"), OpClass::Matmul);  // in place: the same work
  EXPECT_EQ(classify_op("aten::addmm_"), OpClass::Matmul);
  EXPECT_EQ(classify_op("aten::addmv_"), OpClass::Matmul);
  EXPECT_EQ(classify_op("aten::convolution_overrideable"), OpClass::Convolution);
  EXPECT_EQ(classify_op("aten::add"), OpClass::Vector);
  EXPECT_EQ(classify_op("aten::exp"), OpClass::Scalar);
  EXPECT_EQ(classify_op("aten::sin"), OpClass::Scalar);
  EXPECT_EQ(classify_op("aten::_softmax"), OpClass::Scalar);
  EXPECT_EQ(classify_op("aten::index_select"), OpClass::GpSimd);
  EXPECT_EQ(classify_op("aten::sort"), OpClass::GpSimd);
}

TEST(OpPolicy, IsOpsAreNotSines) {
  EXPECT_EQ(classify_op("aten::isin"), OpClass::GpSimd);
  EXPECT_EQ(classify_op("aten::isinf"), OpClass::Vector);
  EXPECT_EQ(classify_op("aten::isneginf"), OpClass::Vector);
  EXPECT_EQ(classify_op("aten::isnan"), OpClass::Vector);
}

TEST(OpPolicy, SolversAndFftFallBack) {
  EXPECT_EQ(classify_op("aten::linalg_svd"), OpClass::Fallback);
  EXPECT_EQ(classify_op("aten::linalg_solve_triangular"), OpClass::Fallback);
  EXPECT_EQ(classify_op("aten::_fft_r2c"), OpClass::Fallback);
  EXPECT_EQ(classify_op("aten::linalg_vector_norm"), OpClass::Scalar);
}

}  // namespace
