#include <cuda_runtime_api.h>

#include "kernels/dependent_launch.cuh"

namespace convoy::kernels {
namespace {

bool DeviceSupportsDependentLaunch() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    cudaGetLastError();  // leave no error behind for the next call to find
    return false;
  }
  return major >= 9;
}

bool Supported() {
  static const bool supported = DeviceSupportsDependentLaunch();
  return supported;
}

// -1: the default (on where supported), 0 off, 1 on.
thread_local int state = -1;

}  // namespace

void SetDependentLaunch(bool enabled) { state = enabled && Supported() ? 1 : 0; }

bool DependentLaunchEnabled() { return state < 0 ? Supported() : state == 1; }

}  // namespace convoy::kernels
