#version 450
layout(constant_id = 0) const float k = 1.0;
layout(constant_id = 1) const int mode = 0;
layout(location = 0) in vec2 uv;
layout(location = 0) out vec4 color;
void main() {
  color = mode == 0 ? vec4(uv, k, 1.0) : vec4(k);
}
