#version 450
// Separable Gaussian-style blur along x; workgroup size and radius are
// specialization constants.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int RADIUS = 4;

layout(set = 0, binding = 0) readonly buffer Src { vec4 src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { vec4 dst[]; };
layout(set = 0, binding = 2) uniform Params { uint width; uint height; float sigma; } params;

void main() {
  uint x = gl_GlobalInvocationID.x, y = gl_GlobalInvocationID.y;
  if (x >= params.width || y >= params.height)
    return;
  vec4 acc = vec4(0.0);
  float wsum = 0.0;
  for (int i = -RADIUS; i <= RADIUS; i++) {
    uint sx = uint(clamp(int(x) + i, 0, int(params.width) - 1));
    float w = exp(-float(i * i) / (2.0 * params.sigma * params.sigma));
    acc += src[y * params.width + sx] * w;
    wsum += w;
  }
  dst[y * params.width + x] = acc / wsum;
}
