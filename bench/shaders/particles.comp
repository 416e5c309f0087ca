#version 450
// Particle integration: several sub-steps of gravity, drag and a ground
// bounce; the workgroup size and sub-step count are specialization constants.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int SUBSTEPS = 2;

struct Particle {
  vec4 pos_life;
  vec4 vel_mass;
};

layout(set = 0, binding = 0) buffer Particles { Particle p[]; };
layout(set = 0, binding = 1) writeonly buffer Out { vec4 out_pos[]; };
layout(set = 0, binding = 2) uniform Params { uint count; uint width; float dt; } params;

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= params.count)
    return;
  Particle q = p[i];
  float h = params.dt / float(SUBSTEPS);
  for (int s = 0; s < SUBSTEPS; s++) {
    vec3 acc = vec3(0.0, -9.81, 0.0) - q.vel_mass.xyz * (0.1 / q.vel_mass.w);
    q.vel_mass.xyz += acc * h;
    q.pos_life.xyz += q.vel_mass.xyz * h;
    if (q.pos_life.y < 0.0) {
      q.pos_life.y = -q.pos_life.y;
      q.vel_mass.y = -q.vel_mass.y * 0.6;
    }
    q.pos_life.w -= h;
  }
  p[i] = q;
  out_pos[i] = vec4(q.pos_life.xyz, q.pos_life.w > 0.0 ? 1.0 : 0.0);
}
