# Fuzz targets of the reliability work (docs/RELIABILITY.md): the frame
# decoder, request dispatch against a real store, blob header validation,
# the pipeline-binary container parser, archive import. With PCACHE_FUZZ each is a libFuzzer binary fuzz_<name>
# (scripts/reliability.sh runs them for a given time); without it,
# fuzz_<name>_replay replays the committed seed corpus through the same
# entry point, and ctest runs that as fuzz-smoke-<name>.

add_library(pcache_fuzz_scratch STATIC scratch.c)
pcache_target_defaults(pcache_fuzz_scratch)

# pcache_fuzz_target(<name> <libraries>...)
function(pcache_fuzz_target name)
  if(PCACHE_FUZZ)
    set(target fuzz_${name})
    add_executable(${target} fuzz_${name}.c)
    target_link_options(${target} PRIVATE -fsanitize=fuzzer)
    # -runs=0: run the corpus once and stop, like the replay main.
    set(args -runs=0)
  else()
    set(target fuzz_${name}_replay)
    add_executable(${target} fuzz_${name}.c replay_main.c)
    set(args)
  endif()
  pcache_target_defaults(${target})
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${target} PRIVATE ${ARGN})
  add_test(NAME fuzz-smoke-${name}
           COMMAND ${target} ${args} ${CMAKE_CURRENT_SOURCE_DIR}/corpus/${name})
  set_tests_properties(fuzz-smoke-${name} PROPERTIES TIMEOUT 60 LABELS "fuzz-smoke;reliability")
endfunction()

pcache_fuzz_target(frame pcache_proto pcache_common)
pcache_fuzz_target(blob pcache_common)
pcache_fuzz_target(binblob pcache_common)
pcache_fuzz_target(segment pcache_proto pcache_common)
pcache_fuzz_target(archive pcached_core pcache_fuzz_scratch)
pcache_fuzz_target(dispatch pcached_core pcache_fuzz_scratch pcache_test_wire)

# The seed corpus generator (run by hand; see make_corpus.c).
if(NOT PCACHE_FUZZ)
  add_executable(fuzz_make_corpus make_corpus.c)
  pcache_target_defaults(fuzz_make_corpus)
  target_link_libraries(fuzz_make_corpus PRIVATE pcache_test_wire)
endif()
