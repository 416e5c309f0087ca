#version 450
// PBR: world-space position, normal and tangent frame for the fragment stage.
layout(constant_id = 0) const bool SKINNED = false;

layout(set = 0, binding = 0) uniform Camera {
  mat4 view_proj;
  mat4 model;
  mat4 bones[4];
  vec4 eye;
} cam;

layout(location = 0) in vec3 in_pos;
layout(location = 1) in vec3 in_normal;
layout(location = 2) in vec2 in_uv;
layout(location = 3) in vec4 in_tangent;

layout(location = 0) out vec3 out_world;
layout(location = 1) out vec3 out_normal;
layout(location = 2) out vec2 out_uv;
layout(location = 3) out vec4 out_tangent;

void main() {
  mat4 m = cam.model;
  if (SKINNED) {
    int b = int(in_tangent.w * 3.0) & 3;
    m = m * cam.bones[b];
  }
  vec4 world = m * vec4(in_pos, 1.0);
  out_world = world.xyz;
  out_normal = normalize(mat3(m) * in_normal);
  out_tangent = vec4(normalize(mat3(m) * in_tangent.xyz), in_tangent.w);
  out_uv = in_uv;
  gl_Position = cam.view_proj * world;
}
