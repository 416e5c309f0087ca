#version 450
layout(vertices = 3) out;
layout(location = 0) in vec2 uv[];
layout(location = 0) out vec2 out_uv[];
void main() {
  out_uv[gl_InvocationID] = uv[gl_InvocationID];
  gl_out[gl_InvocationID].gl_Position = gl_in[gl_InvocationID].gl_Position;
  gl_TessLevelInner[0] = 1.0;
  gl_TessLevelOuter[0] = 1.0;
  gl_TessLevelOuter[1] = 1.0;
  gl_TessLevelOuter[2] = 1.0;
}
