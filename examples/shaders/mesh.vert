#version 450
// Vertex stage of the demo: a transformed mesh with normals and UVs.

layout(set = 0, binding = 0) uniform Scene {
  mat4 view_proj;
  vec4 camera_pos;
  vec4 light_pos[16];
  vec4 light_color[16];
} scene;

layout(push_constant) uniform Push {
  mat4 model;
} push;

layout(location = 0) in vec3 in_pos;
layout(location = 1) in vec3 in_normal;
layout(location = 2) in vec2 in_uv;

layout(location = 0) out vec3 out_world_pos;
layout(location = 1) out vec3 out_normal;
layout(location = 2) out vec2 out_uv;

void main() {
  vec4 world = push.model * vec4(in_pos, 1.0);
  out_world_pos = world.xyz;
  out_normal = mat3(push.model) * in_normal;
  out_uv = in_uv;
  gl_Position = scene.view_proj * world;
}
