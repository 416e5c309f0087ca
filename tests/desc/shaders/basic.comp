#version 450
layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 1) const uint scale = 2;
layout(push_constant) uniform P { uint base; } p;
shared uint tmp[64];
void main() {
  tmp[gl_LocalInvocationIndex % 64] = p.base * scale;
  barrier();
}
