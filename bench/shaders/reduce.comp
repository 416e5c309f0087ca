#version 450
// Workgroup reduction through shared memory; the workgroup size and the
// number of elements each invocation folds first are specialization
// constants.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int PER_THREAD = 4;

layout(set = 0, binding = 0) readonly buffer Src { float src[]; };
layout(set = 0, binding = 1) buffer Dst { float dst[]; };
layout(set = 0, binding = 2) uniform Params { uint count; uint width; float scale; } params;

shared float partial[1024];

void main() {
  uint lid = gl_LocalInvocationID.x;
  uint base = gl_WorkGroupID.x * gl_WorkGroupSize.x * uint(PER_THREAD);
  float s = 0.0;
  for (int k = 0; k < PER_THREAD; k++) {
    uint i = base + uint(k) * gl_WorkGroupSize.x + lid;
    if (i < params.count)
      s += src[i];
  }
  partial[lid] = s;
  barrier();
  for (uint stride = gl_WorkGroupSize.x / 2u; stride > 0u; stride >>= 1u) {
    if (lid < stride)
      partial[lid] += partial[lid + stride];
    barrier();
  }
  if (lid == 0u)
    dst[gl_WorkGroupID.x] = partial[0] * params.scale;
}
