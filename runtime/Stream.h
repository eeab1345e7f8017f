//===- Stream.h - Streams and events ----------------------------*- C++ -*-===//
//
// How work on a device is ordered, in CUDA's terms: a stream is an ordered
// queue of work, an event marks a point in a stream that other streams or the
// host can wait for. Kernel backends (runtime/Backend.h) create them; the
// executor queues kernels on a compute stream and passes events to the
// communicator (runtime/comm/Communicator.h) so that collectives start after
// their input is written and later kernels run after they complete.
//
// On the CPU backend work runs on the calling thread when it is queued, so
// every operation here returns at once: an event is complete as soon as it is
// recorded. The CUDA backend maps them onto cudaStream_t and cudaEvent_t.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_STREAM_H
#define SHARDC_RUNTIME_STREAM_H

#include "llvm/Support/Error.h"

namespace shardc::rt {

/// An ordered queue of work on a device. CPU streams run work eagerly.
class Stream {
public:
  virtual ~Stream() = default;
  /// Blocks the calling thread until all work queued so far has finished
  /// (cudaStreamSynchronize).
  virtual llvm::Error synchronize() = 0;
};

/// A marker in a stream that another stream or the host can wait for.
class Event {
public:
  virtual ~Event() = default;
  /// Marks the point after all work queued on `stream` so far
  /// (cudaEventRecord). Recording again moves the mark.
  virtual llvm::Error record(Stream &stream) = 0;
  /// Makes work queued on `stream` from now on wait until the recorded point
  /// is reached (cudaStreamWaitEvent); does not block the calling thread.
  virtual llvm::Error wait(Stream &stream) = 0;
  /// Blocks the calling thread until the recorded point is reached
  /// (cudaEventSynchronize). May be called from any thread, while no thread
  /// records the event.
  virtual llvm::Error synchronize() = 0;
  /// Microseconds from `earlier`'s recorded point to this event's, both
  /// reached (cudaEventElapsedTime); only for events of
  /// KernelBackend::createTimingEvent().
  virtual llvm::Expected<double> microsSince(const Event &earlier) const {
    return llvm::createStringError("this event does not measure time");
  }
};

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_STREAM_H
