#version 450
// The specialization constant makes distinct pipelines from one module.
layout(constant_id = 0) const float TINT = 1.0;
layout(set = 0, binding = 0) uniform Params { vec4 scale; } params;
layout(location = 0) in vec3 color;
layout(location = 0) out vec4 out_color;
void main() { out_color = vec4(color * TINT, 1.0) * params.scale; }
