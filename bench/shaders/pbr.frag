#version 450
// PBR-style shading: Cook-Torrance GGX with a clear-coat lobe over a loop of
// point lights, parallax-occlusion normal mapping and 5x5 PCF shadows, with
// the light count, normal mapping and shadowing chosen by specialization
// constants (as engines build their permutations). Sized like a production
// uber-shader, so a cold compile costs what the README's table measured on a real
// driver rather than a toy's fraction of it.
layout(constant_id = 0) const int LIGHT_COUNT = 4;
layout(constant_id = 1) const bool NORMAL_MAP = false;
layout(constant_id = 2) const bool SHADOWS = false;
layout(constant_id = 3) const bool EMISSIVE = false;

struct Light {
  vec4 pos_radius;
  vec4 color_intensity;
};

layout(set = 0, binding = 0) uniform Camera {
  mat4 view_proj;
  mat4 model;
  mat4 bones[4];
  vec4 eye;
} cam;
layout(set = 0, binding = 1) uniform Lights {
  Light lights[32];
  mat4 shadow_matrix;
} lit;
layout(set = 0, binding = 2) uniform sampler2D albedo_map;
layout(set = 0, binding = 3) uniform sampler2D normal_map;
layout(set = 0, binding = 4) uniform sampler2D metal_rough_map;
layout(set = 0, binding = 5) uniform sampler2DShadow shadow_map;
layout(set = 0, binding = 6) uniform sampler2D height_map;

layout(push_constant) uniform Push {
  vec4 base_color;
  vec4 emissive;
} pc;

layout(location = 0) in vec3 in_world;
layout(location = 1) in vec3 in_normal;
layout(location = 2) in vec2 in_uv;
layout(location = 3) in vec4 in_tangent;
layout(location = 0) out vec4 out_color;

const float PI = 3.14159265;

float d_ggx(float ndh, float a) {
  float a2 = a * a;
  float d = ndh * ndh * (a2 - 1.0) + 1.0;
  return a2 / (PI * d * d);
}

float g_smith(float ndv, float ndl, float a) {
  float k = (a + 1.0) * (a + 1.0) / 8.0;
  return (ndv / (ndv * (1.0 - k) + k)) * (ndl / (ndl * (1.0 - k) + k));
}

vec3 f_schlick(float c, vec3 f0) {
  return f0 + (1.0 - f0) * pow(1.0 - c, 5.0);
}

void main() {
  vec3 n = normalize(in_normal);
  vec2 uv = in_uv;
  if (NORMAL_MAP) {
    vec3 t = normalize(in_tangent.xyz);
    vec3 b = cross(n, t) * in_tangent.w;
    // Parallax occlusion: march the height field in tangent space.
    vec3 vt = normalize(transpose(mat3(t, b, n)) * (cam.eye.xyz - in_world));
    vec2 step_uv = vt.xy / max(vt.z, 0.1) * 0.04 / 24.0;
    float layer = 1.0 / 24.0, depth = 0.0, h = texture(height_map, uv).r;
    for (int k = 0; k < 24 && depth < h; k++) {
      uv -= step_uv;
      h = texture(height_map, uv).r;
      depth += layer;
    }
    vec2 prev = uv + step_uv;
    float after = h - depth, before = texture(height_map, prev).r - depth + layer;
    uv = mix(uv, prev, after / (after - before + 1e-5));
    vec3 tn = texture(normal_map, uv).xyz * 2.0 - 1.0;
    n = normalize(mat3(t, b, n) * tn);
  }
  vec4 albedo = texture(albedo_map, uv) * pc.base_color;
  vec2 mr = texture(metal_rough_map, uv).bg;
  float metal = mr.x, rough = max(mr.y, 0.04);
  float coat = pc.emissive.a, coat_rough = 0.05 + 0.2 * albedo.a;
  vec3 v = normalize(cam.eye.xyz - in_world);
  vec3 f0 = mix(vec3(0.04), albedo.rgb, metal);
  vec3 color = vec3(0.0);
  for (int i = 0; i < LIGHT_COUNT; i++) {
    vec3 lv = lit.lights[i].pos_radius.xyz - in_world;
    float dist = length(lv);
    vec3 l = lv / dist;
    vec3 h = normalize(v + l);
    float ndl = max(dot(n, l), 0.0), ndv = max(dot(n, v), 1e-4);
    float ndh = max(dot(n, h), 0.0), vdh = max(dot(v, h), 0.0);
    float atten = clamp(1.0 - dist / lit.lights[i].pos_radius.w, 0.0, 1.0);
    vec3 f = f_schlick(vdh, f0);
    vec3 spec = d_ggx(ndh, rough * rough) * g_smith(ndv, ndl, rough) * f / (4.0 * ndv * ndl + 1e-4);
    vec3 diff = (1.0 - f) * (1.0 - metal) * albedo.rgb / PI;
    // Clear coat: a second, smoother GGX lobe with its own Fresnel that
    // takes energy from the base layers.
    float fc = f_schlick(vdh, vec3(0.04)).x * coat;
    float coat_spec = d_ggx(ndh, coat_rough * coat_rough) * g_smith(ndv, ndl, coat_rough) * fc /
                      (4.0 * ndv * ndl + 1e-4);
    color += ((diff + spec) * (1.0 - fc) + coat_spec) * lit.lights[i].color_intensity.rgb *
             lit.lights[i].color_intensity.a * ndl * atten * atten;
  }
  if (SHADOWS) {
    vec4 sc = lit.shadow_matrix * vec4(in_world, 1.0);
    vec3 p = sc.xyz / sc.w;
    vec2 texel = 1.0 / vec2(textureSize(shadow_map, 0));
    float lit_sum = 0.0;
    for (int y = -2; y <= 2; y++)
      for (int x = -2; x <= 2; x++)
        lit_sum += texture(shadow_map, vec3(p.xy + vec2(x, y) * texel, p.z));
    color *= lit_sum / 25.0;
  }
  if (EMISSIVE)
    color += pc.emissive.rgb;
  out_color = vec4(color, albedo.a);
}
