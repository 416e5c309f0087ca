#version 450
// Unlit: texture times colour, optional alpha test (specialization constant).
layout(constant_id = 0) const bool ALPHA_TEST = false;
layout(constant_id = 1) const float ALPHA_CUTOFF = 0.5;

layout(set = 0, binding = 1) uniform sampler2D tex;

layout(location = 0) in vec2 in_uv;
layout(location = 1) in vec4 in_color;
layout(location = 0) out vec4 out_color;

void main() {
  vec4 c = texture(tex, in_uv) * in_color;
  if (ALPHA_TEST && c.a < ALPHA_CUTOFF)
    discard;
  out_color = c;
}
