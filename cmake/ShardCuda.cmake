# The CUDA backend (runtime/cuda): the CUDA toolkit (nvcc, the runtime and
# cuBLAS), cuDNN and NCCL. They compile and link without a GPU, so every
# build that finds them builds the backend; whether a GPU is there is decided
# when shardrun starts (--device).
#
# SHARD_CUDA: AUTO (build the backend when all of them are found), ON (the
# same, an error naming what is missing otherwise) or OFF.
# CMAKE_CUDA_ARCHITECTURES: the GPUs the kernels are compiled for; by default
# sm_80 (A100) and sm_90 (H100, H200), as real code plus PTX for sm_90 so
# that newer GPUs can JIT it.

set(SHARD_CUDA AUTO CACHE STRING "Build the CUDA backend (AUTO|ON|OFF)")
set_property(CACHE SHARD_CUDA PROPERTY STRINGS AUTO ON OFF)
set(SHARD_CUDA_ENABLED OFF)
if(SHARD_CUDA STREQUAL "OFF")
  message(STATUS "CUDA backend: off (SHARD_CUDA=OFF)")
  return()
endif()

function(shard_cuda_missing why)
  if(SHARD_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SHARD_CUDA=ON: ${why}")
  endif()
  message(STATUS "CUDA backend: not built (${why})")
endfunction()

# nvcc is on PATH on a machine set up for CUDA; the toolkit's default prefix
# otherwise.
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(SHARD_NVCC nvcc HINTS /usr/local/cuda/bin)
  if(SHARD_NVCC)
    set(CMAKE_CUDA_COMPILER ${SHARD_NVCC})
  endif()
endif()
if(NOT CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  shard_cuda_missing("no CUDA compiler (nvcc) found; set CUDACXX")
  return()
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

find_package(CUDAToolkit)
if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cudart OR NOT TARGET CUDA::cublasLt)
  shard_cuda_missing("the CUDA toolkit's runtime or cuBLAS was not found")
  return()
endif()

find_path(SHARD_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
find_library(SHARD_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
find_path(SHARD_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
find_library(SHARD_NCCL_LIBRARY nccl
  HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
if(NOT SHARD_CUDNN_INCLUDE OR NOT SHARD_CUDNN_LIBRARY)
  shard_cuda_missing("cuDNN (cudnn.h, libcudnn) was not found")
  return()
endif()
if(NOT SHARD_NCCL_INCLUDE OR NOT SHARD_NCCL_LIBRARY)
  shard_cuda_missing("NCCL (nccl.h, libnccl) was not found")
  return()
endif()

add_library(Shard::cudnn UNKNOWN IMPORTED)
set_target_properties(Shard::cudnn PROPERTIES
  IMPORTED_LOCATION ${SHARD_CUDNN_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${SHARD_CUDNN_INCLUDE})
add_library(Shard::nccl UNKNOWN IMPORTED)
set_target_properties(Shard::nccl PROPERTIES
  IMPORTED_LOCATION ${SHARD_NCCL_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${SHARD_NCCL_INCLUDE})

set(SHARD_CUDA_ENABLED ON)
message(STATUS "CUDA backend: CUDA ${CUDAToolkit_VERSION} for "
  "${CMAKE_CUDA_ARCHITECTURES}, cuDNN ${SHARD_CUDNN_LIBRARY}, "
  "NCCL ${SHARD_NCCL_LIBRARY}")
