//===- ShardcInterfaces.h - Op interfaces of shardc -------------*- C++ -*-===//
#ifndef SHARDC_IR_SHARDCINTERFACES_H
#define SHARDC_IR_SHARDCINTERFACES_H

#include "mlir/IR/OpDefinition.h"

namespace shardc {
class GradientEmitter;
} // namespace shardc

#include "ir/ShardcInterfaces.h.inc"

#endif // SHARDC_IR_SHARDCINTERFACES_H
