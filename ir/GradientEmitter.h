//===- GradientEmitter.h - What a gradient rule builds with -----*- C++ -*-===//
//
// The gradient rules of DifferentiableOpInterface (ir/gradients/) see the
// autodiff pass through this class: the gradients of the op's results, which
// values need gradients, where to add an operand's gradient, and a builder
// positioned in the backward pass. The helpers build the ops the rules share
// (broadcast-aware arithmetic, sums back to an operand's shape).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_IR_GRADIENTEMITTER_H
#define SHARDC_IR_GRADIENTEMITTER_H

#include "ir/ShardcDialect.h"
#include "ir/ShardcInterfaces.h"

#include "mlir/IR/Builders.h"

namespace shardc {

/// The type of a shardc value (every one is a static-shape ranked tensor).
inline mlir::RankedTensorType tensorTy(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType());
}

/// Implemented by the autodiff pass; handed to each rule.
class GradientEmitter {
public:
  virtual ~GradientEmitter() = default;

  /// The gradient of the loss with respect to `result`, or null when the
  /// loss does not depend on it.
  virtual mlir::Value grad(mlir::Value result) const = 0;
  /// Whether `v` depends on a trainable parameter, i.e. needs a gradient.
  virtual bool isActive(mlir::Value v) const = 0;
  /// Adds `g` to the gradient of `v`. Does nothing when `g` is null or `v` is
  /// not active; `g` must have `v`'s type.
  virtual void accumulate(mlir::Value v, mlir::Value g) = 0;

  /// The builder, positioned where the backward ops go.
  mlir::OpBuilder &getBuilder() { return builder; }
  /// The location of the op being differentiated, given to every backward op.
  mlir::Location getLoc() const { return loc; }
  /// Builds an `OpTy` at the insertion point, at getLoc().
  template <typename OpTy, typename... Args> OpTy create(Args &&...args) {
    return builder.create<OpTy>(loc, std::forward<Args>(args)...);
  }

  /// The gradient of `op`'s first result, for rules that differentiate only
  /// through it; fails with a diagnostic on `op` when the gradient reaches
  /// only its other results.
  mlir::FailureOr<mlir::Value> firstResultGrad(mlir::Operation *op) const;

  /// A scalar (rank-0) constant of `elemType`.
  mlir::Value constant(mlir::Type elemType, double v);
  /// `a * c` and `a / c` with numpy broadcasting, in `a`'s element type.
  mlir::Value mul(mlir::Value a, mlir::Value c);
  mlir::Value div(mlir::Value a, mlir::Value c);
  mlir::Value neg(mlir::Value a);
  /// `a * s`; `a` itself when `s` is 1.
  mlir::Value scale(mlir::Value a, double s);
  /// Sums a broadcast gradient down to `target`'s shape (the gradient of a
  /// broadcast operand).
  mlir::Value sumTo(mlir::Value grad, mlir::RankedTensorType target);
  /// A Reshape to `type`; `v` itself when it has that type.
  mlir::Value reshape(mlir::Value v, mlir::RankedTensorType type);
  /// Swaps the last two dimensions.
  mlir::Value transposeLast2(mlir::Value v);
  /// A zero constant of `type`.
  mlir::Value zerosLike(mlir::RankedTensorType type);

protected:
  explicit GradientEmitter(mlir::MLIRContext *ctx)
      : builder(ctx), loc(mlir::UnknownLoc::get(ctx)) {}

  mlir::OpBuilder builder;
  mlir::Location loc;
};

} // namespace shardc

#endif // SHARDC_IR_GRADIENTEMITTER_H
