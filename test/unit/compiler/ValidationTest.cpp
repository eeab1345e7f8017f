//===- ValidationTest.cpp - Overflow-checked sizes and option ranges ------===//
//
// The arithmetic that bounds what a hostile model or flag can make shardc
// compute: element and byte counts that never wrap (ModelValidator.h,
// FoldConstants.h), the attribute reader that never reads a wrong-typed
// attribute as a default, and the ranges of numeric options
// (OptionRange.h).
//
//===----------------------------------------------------------------------===//
#include "frontend/ModelValidator.h"
#include "ir/ShardcDialect.h"
#include "passes/FoldConstants.h"
#include "passes/OptionRange.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace shardc;

namespace {

TEST(ValidationTest, ElementCountsNeverWrap) {
  EXPECT_EQ(checkedElementCount({}), 1);
  EXPECT_EQ(checkedElementCount({2, 3, 4}), 24);
  EXPECT_EQ(checkedElementCount({int64_t(1) << 23, int64_t(1) << 23}),
            kMaxTensorElements);
  // 2^32 * 2^32 * 16 is 0 modulo 2^64: it folded to a ReduceSum of nothing.
  EXPECT_FALSE(checkedElementCount({int64_t(1) << 32, int64_t(1) << 32, 16}));
  EXPECT_FALSE(checkedElementCount({int64_t(1) << 23, (int64_t(1) << 23) + 1}));
  EXPECT_FALSE(checkedElementCount({3, -1}));
  // Every dimension is bounded, even beside a zero one.
  EXPECT_EQ(checkedElementCount({0, int64_t(1) << 40}), 0);
  EXPECT_FALSE(checkedElementCount({0, int64_t(1) << 62}));
  // And so is the product of the others: no flattening of an empty tensor
  // wraps (2^46 * (2^18 - 1) wrapped to a negative row count).
  EXPECT_EQ(checkedElementCount({int64_t(1) << 23, 0, int64_t(1) << 23}), 0);
  EXPECT_FALSE(
      checkedElementCount({int64_t(1) << 46, (int64_t(1) << 18) - 1, 0}));
  EXPECT_FALSE(checkedElementCount({int64_t(1) << 32, int64_t(1) << 32, 0}));
}

TEST(ValidationTest, ByteCountsNeverWrap) {
  EXPECT_EQ(checkedByteCount(kMaxTensorElements, 8), kMaxTensorElements * 8);
  EXPECT_FALSE(checkedByteCount(std::numeric_limits<int64_t>::max() / 4, 8));
  EXPECT_FALSE(checkedByteCount(-1, 4));
}

TEST(ValidationTest, TensorBytesOfFoldsNeverWrap) {
  mlir::MLIRContext ctx;
  mlir::Builder b(&ctx);
  auto f32 = b.getF32Type();
  EXPECT_EQ(tensorBytes(mlir::RankedTensorType::get({4, 4}, f32)), 64);
  EXPECT_FALSE(tensorBytes(mlir::RankedTensorType::get(
      {int64_t(1) << 32, int64_t(1) << 32, 16}, f32)));
  EXPECT_FALSE(
      tensorBytes(mlir::RankedTensorType::get({int64_t(1) << 62}, f32)));
}

TEST(ValidationTest, AttributeOfAnotherTypeIsNeverADefault) {
  mlir::MLIRContext ctx;
  mlir::Location loc = mlir::UnknownLoc::get(&ctx);
  std::string messages;
  ctx.getDiagEngine().registerHandler([&](mlir::Diagnostic &d) {
    messages += d.str() + "\n";
    return mlir::success();
  });
  onnx::NodeProto node;
  node.set_op_type("Gemm");
  onnx::AttributeProto *beta = node.add_attribute();
  beta->set_name("beta");
  beta->set_type(onnx::AttributeProto::STRING);
  beta->set_s("garbage");
  auto error = [&] { return mlir::emitError(loc); };

  bool failed = false;
  EXPECT_EQ(
      findAttribute(node, "alpha", onnx::AttributeProto::FLOAT, error, failed),
      nullptr);
  EXPECT_FALSE(failed) << "an absent attribute is no error";
  EXPECT_EQ(
      findAttribute(node, "beta", onnx::AttributeProto::FLOAT, error, failed),
      nullptr);
  EXPECT_TRUE(failed);
  EXPECT_EQ(messages,
            "attribute 'beta' has type string; Gemm reads it as float\n");

  failed = false;
  EXPECT_EQ(
      findAttribute(node, "beta", onnx::AttributeProto::STRING, error, failed),
      beta);
  EXPECT_FALSE(failed);
}

TEST(ValidationTest, OptionRanges) {
  double inf = std::numeric_limits<double>::infinity();
  OptionRange<double> nonNegative{0, inf, false, true, "finite and >= 0"};
  EXPECT_TRUE(nonNegative.contains(0));
  EXPECT_TRUE(nonNegative.contains(1e30));
  EXPECT_FALSE(nonNegative.contains(-1));
  EXPECT_FALSE(nonNegative.contains(inf));
  EXPECT_FALSE(nonNegative.contains(std::nan("")));

  OptionRange<double> bucket{0, 1048576, true, false, "in (0, 1048576]"};
  EXPECT_FALSE(bucket.contains(0));
  EXPECT_TRUE(bucket.contains(1048576));
  EXPECT_FALSE(bucket.contains(1e30));

  OptionRange<int64_t> world{1, 1048576, false, false, "in [1, 1048576]"};
  EXPECT_FALSE(world.contains(std::numeric_limits<int64_t>::max()));
  EXPECT_FALSE(world.contains(0));
  EXPECT_TRUE(world.contains(1048576));

  // A default outside the range (weight-decay's -1) means "not given".
  EXPECT_FALSE(checkOptionRange<double>("weight-decay", -1, -1, nonNegative));
  EXPECT_EQ(checkOptionRange<double>("weight-decay", -2, -1, nonNegative),
            "weight-decay must be finite and >= 0, got -2");
  EXPECT_EQ(checkOptionRange<double>("lr", std::nan(""), 1e-3, nonNegative),
            "lr must be finite and >= 0, got nan");
}

} // namespace
