//===- LossScale.cpp - The loss scale as step state -----------------------===//
//
// The forward half of loss scaling (torch.cuda.amp.GradScaler): adds the
// scale and its growth tracker as float32 state arguments of @main, the
// scale starting at its initial value. Autodiff seeds the loss gradient with
// the scale; shardc-unscale-gradients (after the ZeRO passes) does the rest.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_LOSSSCALE
#include "passes/Passes.h.inc"

namespace {

/// GradScaler's init_scale.
constexpr double kDefaultInitScale = 65536.0;

struct LossScalePass : impl::LossScaleBase<LossScalePass> {
  using LossScaleBase::LossScaleBase;
  SHARDC_CHECK_OPTIONS_LossScale;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "loss-scale");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    if (std::optional<std::string> err = checkOptions()) {
      func.emitError("loss-scale: ") << *err;
      return signalPassFailure();
    }
    LossScaleSpec spec = lossScale.getValue();
    if (spec.kind == LossScaleSpec::Auto) {
      auto dtype = func->getAttrOfType<TypeAttr>(kParamDTypeAttrName);
      spec.kind = dtype && dtype.getValue().isF16() ? LossScaleSpec::Dynamic
                                                    : LossScaleSpec::None;
    }
    // The dynamic options' defaults; init-loss-scale's (0, outside its
    // range) means "not given".
    bool dynamicGiven = initLossScale != 0 || growthFactor != 2.0 ||
                        backoffFactor != 0.5 || growthInterval != 2000;
    if (spec.kind != LossScaleSpec::Dynamic && dynamicGiven) {
      func.emitError("loss-scale: init-loss-scale and the "
                     "loss-scale-growth/backoff options are for a dynamic "
                     "loss scale: add loss-scale=dynamic");
      return signalPassFailure();
    }
    if (spec.kind == LossScaleSpec::None)
      return;
    for (BlockArgument arg : func.getArguments())
      if (func.getArgAttr(arg.getArgNumber(), kLossScaleAttrName)) {
        func.emitError("loss-scale: the step already has a loss scale");
        return signalPassFailure();
      }

    OpBuilder b(func.getContext());
    double init = spec.kind == LossScaleSpec::Static ? spec.value
                  : initLossScale != 0               ? initLossScale.getValue()
                                                     : kDefaultInitScale;
    // The scale is a float32 tensor, as GradScaler's: a normal float32,
    // since a zero scale would zero every gradient and its reciprocal
    // would turn the update into NaN.
    float f32 = static_cast<float>(init);
    if (!std::isfinite(f32) || f32 < std::numeric_limits<float>::min()) {
      func.emitError("loss-scale: the loss scale ")
          << init
          << " is not a normal float32 (between 1.2e-38 and 3.4e38); give a "
             "power of two such as 65536";
      return signalPassFailure();
    }
    init = static_cast<float>(init);
    // A static scale never changes.
    auto scaling =
        spec.kind == LossScaleSpec::Static
            ? LossScalingAttr::get(b.getContext(), llvm::APFloat(1.0),
                                   llvm::APFloat(1.0), 1)
            : LossScalingAttr::get(
                  b.getContext(), llvm::APFloat(growthFactor.getValue()),
                  llvm::APFloat(backoffFactor.getValue()), growthInterval);
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    Location loc = NameLoc::get(b.getStringAttr("loss_scale"), func.getLoc());
    unsigned idx = func.getNumArguments();
    func.insertArgument(
        idx, scalar,
        b.getDictionaryAttr(
            {b.getNamedAttr(kStateAttrName, b.getStringAttr("loss_scale")),
             b.getNamedAttr(kStateInitAttrName, b.getF64FloatAttr(init)),
             b.getNamedAttr(kLossScaleAttrName, scaling)}),
        loc);
    func.insertArgument(
        idx + 1, scalar,
        b.getDictionaryAttr(
            {b.getNamedAttr(kStateAttrName,
                            b.getStringAttr("loss_scale.growth_tracker")),
             b.getNamedAttr(kLossScaleTrackerAttrName, b.getUnitAttr())}),
        loc);
  }
};

} // namespace
} // namespace shardc
