#version 450
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint FILL = 0u;
layout(set = 0, binding = 1) buffer Data { uint values[]; } data;
void main() { data.values[gl_GlobalInvocationID.x] = FILL + gl_GlobalInvocationID.x; }
