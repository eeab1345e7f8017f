//===- ShardcInterfaces.cpp - Op interfaces of shardc ---------------------===//
#include "ir/ShardcInterfaces.h"

#include "ir/ShardcInterfaces.cpp.inc"
