# The benchmark suite (issue 7): bench_warm, bench_delivery, bench_ingest,
# bench_tiers, bench_merge, and the scripts that run them (run-all.sh, run-warm.sh).
# Included from bench/CMakeLists.txt.

# Shaders are compiled to SPIR-V headers at build time; nothing at run time
# needs glslang (the GPU machine has none).
set(PCACHE_BENCH_SHADER_DIR ${CMAKE_CURRENT_BINARY_DIR}/shaders)
file(MAKE_DIRECTORY ${PCACHE_BENCH_SHADER_DIR})
set(PCACHE_BENCH_SHADERS
  unlit.vert unlit.frag pbr.vert pbr.frag blur.comp reduce.comp particles.comp)
set(PCACHE_BENCH_SHADER_HEADERS "")
if(GLSLANG_VALIDATOR)
  foreach(src ${PCACHE_BENCH_SHADERS})
    string(REPLACE "." "_" name ${src})
    set(out ${PCACHE_BENCH_SHADER_DIR}/${name}.h)
    add_custom_command(
      OUTPUT ${out}
      COMMAND ${GLSLANG_VALIDATOR} -V --quiet --vn spv_${name} -o ${out}
              ${CMAKE_CURRENT_SOURCE_DIR}/shaders/${src}
      DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/shaders/${src}
      COMMENT "glslangValidator bench/shaders/${src}"
      VERBATIM)
    list(APPEND PCACHE_BENCH_SHADER_HEADERS ${out})
  endforeach()
endif()

# Helpers shared by the daemon benchmarks (crafted entries, transport).
add_library(pcache_bench_util STATIC bench_util.c bench_entry.c)
pcache_target_defaults(pcache_bench_util)
target_include_directories(pcache_bench_util PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(pcache_bench_util PUBLIC pcache_static Threads::Threads)

foreach(bench bench_delivery bench_ingest)
  add_executable(${bench} ${bench}.c)
  pcache_target_defaults(${bench})
  target_link_libraries(${bench} PRIVATE pcache_bench_util)
endforeach()

# The sockets' own floor under bench_delivery's Get (no pcache code).
add_executable(bench_floor bench_floor.c bench_util.c)
pcache_target_defaults(bench_floor)
target_link_libraries(bench_floor PRIVATE Threads::Threads)

if(GLSLANG_VALIDATOR)
  add_library(pcache_bench_pipeset STATIC pipeset.c ${PCACHE_BENCH_SHADER_HEADERS})
  pcache_target_defaults(pcache_bench_pipeset)
  target_include_directories(pcache_bench_pipeset PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}
                             PRIVATE ${PCACHE_BENCH_SHADER_DIR})
  target_link_libraries(pcache_bench_pipeset PUBLIC pcache_bench_util)
  foreach(bench bench_warm bench_tiers bench_merge bench_binary)
    add_executable(${bench} ${bench}.c)
    pcache_target_defaults(${bench})
    target_link_libraries(${bench} PRIVATE pcache_bench_pipeset)
  endforeach()
  # Misses without a stall (issue 17) on pcache-demo's shaders.
  add_executable(bench_gpl bench_gpl.c bench_gpl_draw.c)
  pcache_target_defaults(bench_gpl)
  target_link_libraries(bench_gpl PRIVATE pcache_static)
  pcache_add_spirv_header(bench_gpl gpl_shaders ${PROJECT_SOURCE_DIR}/examples/shaders/mesh.vert
                          ${PROJECT_SOURCE_DIR}/examples/shaders/pbr.frag)
else()
  message(STATUS "glslangValidator not found: bench_warm and bench_tiers are not built")
endif()

add_custom_target(pcache_bench)
add_dependencies(pcache_bench bench_delivery bench_ingest bench_floor)
if(GLSLANG_VALIDATOR)
  add_dependencies(pcache_bench bench_warm bench_tiers bench_merge bench_gpl bench_binary)
endif()
