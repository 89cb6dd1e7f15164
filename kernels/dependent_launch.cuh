// Programmatic dependent launch (sm_90 and later): the kernels of this library may be launched so
// that each one's blocks are scheduled while the kernel before it in the stream is still running,
// which hides the gap between two dependent launches (a few microseconds, much of a small
// kernel's time at decode). Every kernel launched that way waits, as its first statement, until
// the kernel before it has completed and its writes are visible (GridDependencyWait in
// device_utils.cuh), so the order of the stream's work is unchanged. Includable from plain C++.
#ifndef CONVOY_KERNELS_DEPENDENT_LAUNCH_CUH_
#define CONVOY_KERNELS_DEPENDENT_LAUNCH_CUH_

namespace convoy::kernels {

// For the calling thread; on by default where the device supports it (compute capability 9.0
// and later, as the first device in use reports). Turning it on where the device lacks it leaves
// it off. A CUDA graph keeps the way its kernels were launched when it was captured.
void SetDependentLaunch(bool enabled);
bool DependentLaunchEnabled();

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_DEPENDENT_LAUNCH_CUH_
