//===- HostDevice.h - Code for the host and the device ----------*- C++ -*-===//
//
// SHARDC_HOST_DEVICE marks a function that compiles for the host and, under
// nvcc, for the device: the element arithmetic every backend shares
// (runtime/kernels/ElementOps.h) and the dropout generator
// (runtime/Philox.h).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_KERNELS_HOSTDEVICE_H
#define SHARDC_RUNTIME_KERNELS_HOSTDEVICE_H

#if defined(__CUDACC__)
#define SHARDC_HOST_DEVICE __host__ __device__
#else
#define SHARDC_HOST_DEVICE
#endif

#endif // SHARDC_RUNTIME_KERNELS_HOSTDEVICE_H
