#version 450
// Unlit: position, uv, optional vertex colour (specialization constant).
layout(constant_id = 0) const bool VERTEX_COLOR = false;

layout(set = 0, binding = 0) uniform Camera {
  mat4 view_proj;
  mat4 model;
} cam;

layout(location = 0) in vec3 in_pos;
layout(location = 1) in vec2 in_uv;
layout(location = 2) in vec4 in_color;

layout(location = 0) out vec2 out_uv;
layout(location = 1) out vec4 out_color;

void main() {
  out_uv = in_uv;
  out_color = VERTEX_COLOR ? in_color : vec4(1.0);
  gl_Position = cam.view_proj * cam.model * vec4(in_pos, 1.0);
}
