#version 450
layout(triangles) in;
layout(location = 0) in vec2 uv[];
layout(location = 0) out vec2 out_uv;
void main() {
  out_uv = uv[0] * gl_TessCoord.x + uv[1] * gl_TessCoord.y + uv[2] * gl_TessCoord.z;
  gl_Position = gl_in[0].gl_Position * gl_TessCoord.x + gl_in[1].gl_Position * gl_TessCoord.y +
                gl_in[2].gl_Position * gl_TessCoord.z;
}
