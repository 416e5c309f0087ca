#version 450
// A triangle from the vertex index, so pipelines need no vertex buffers.
layout(push_constant) uniform Push { vec2 offset; } pc;
layout(location = 0) out vec3 color;
void main() {
  vec2 pos[3] = vec2[](vec2(0.0, -0.5), vec2(0.5, 0.5), vec2(-0.5, 0.5));
  gl_Position = vec4(pos[gl_VertexIndex % 3] + pc.offset, 0.0, 1.0);
  color = vec3(gl_VertexIndex == 0, gl_VertexIndex == 1, gl_VertexIndex == 2);
}
