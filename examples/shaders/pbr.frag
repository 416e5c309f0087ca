#version 450
// A PBR-ish fragment stage (Cook-Torrance GGX, Schlick Fresnel) with a light
// loop whose length is a specialization constant: each value is a different
// pipeline the driver has to compile for real.

layout(constant_id = 0) const int LIGHT_COUNT = 4;
layout(constant_id = 1) const bool ALPHA_TEST = false;

layout(set = 0, binding = 0) uniform Scene {
  mat4 view_proj;
  vec4 camera_pos;
  vec4 light_pos[16];
  vec4 light_color[16];
} scene;

layout(set = 0, binding = 1) uniform sampler2D albedo_map;

layout(location = 0) in vec3 in_world_pos;
layout(location = 1) in vec3 in_normal;
layout(location = 2) in vec2 in_uv;

layout(location = 0) out vec4 out_color;

const float PI = 3.14159265359;

float distribution_ggx(vec3 n, vec3 h, float roughness) {
  float a = roughness * roughness;
  float a2 = a * a;
  float n_dot_h = max(dot(n, h), 0.0);
  float d = n_dot_h * n_dot_h * (a2 - 1.0) + 1.0;
  return a2 / (PI * d * d);
}

float geometry_schlick_ggx(float n_dot_v, float roughness) {
  float k = (roughness + 1.0) * (roughness + 1.0) / 8.0;
  return n_dot_v / (n_dot_v * (1.0 - k) + k);
}

float geometry_smith(vec3 n, vec3 v, vec3 l, float roughness) {
  return geometry_schlick_ggx(max(dot(n, v), 0.0), roughness) *
         geometry_schlick_ggx(max(dot(n, l), 0.0), roughness);
}

vec3 fresnel_schlick(float cos_theta, vec3 f0) {
  return f0 + (1.0 - f0) * pow(clamp(1.0 - cos_theta, 0.0, 1.0), 5.0);
}

void main() {
  vec4 albedo = texture(albedo_map, in_uv);
  if (ALPHA_TEST && albedo.a < 0.5)
    discard;
  float metallic = clamp(albedo.b, 0.0, 1.0);
  float roughness = clamp(albedo.g, 0.05, 1.0);

  vec3 n = normalize(in_normal);
  vec3 v = normalize(scene.camera_pos.xyz - in_world_pos);
  vec3 f0 = mix(vec3(0.04), albedo.rgb, metallic);
  vec3 lo = vec3(0.0);

  for (int i = 0; i < LIGHT_COUNT; i++) {
    int li = i % 16;
    vec3 to_light = scene.light_pos[li].xyz - in_world_pos;
    vec3 l = normalize(to_light);
    vec3 h = normalize(v + l);
    float attenuation = 1.0 / max(dot(to_light, to_light), 1e-4);
    vec3 radiance = scene.light_color[li].rgb * attenuation;

    float ndf = distribution_ggx(n, h, roughness);
    float g = geometry_smith(n, v, l, roughness);
    vec3 f = fresnel_schlick(max(dot(h, v), 0.0), f0);
    vec3 specular = ndf * g * f / (4.0 * max(dot(n, v), 0.0) * max(dot(n, l), 0.0) + 1e-4);
    vec3 kd = (vec3(1.0) - f) * (1.0 - metallic);
    lo += (kd * albedo.rgb / PI + specular) * radiance * max(dot(n, l), 0.0);
  }

  vec3 color = lo + vec3(0.03) * albedo.rgb;
  color = color / (color + vec3(1.0));
  color = pow(color, vec3(1.0 / 2.2));
  out_color = vec4(color, albedo.a);
}
