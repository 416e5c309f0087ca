# Sanitizer builds (PCACHE_SANITIZE). The flags go on every target; with
# AddressSanitizer, every executable also gets tests/sanitize/keep_modules.c,
# which keeps dlopen()ed modules (the Vulkan driver, LLVM) mapped until exit
# so that LeakSanitizer can name them and scripts/lsan.supp can suppress them
# by module. See docs/testing.md, "Sanitizer runs".
if(PCACHE_SANITIZE)
  add_compile_options(-fsanitize=${PCACHE_SANITIZE} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${PCACHE_SANITIZE})
endif()

if(PCACHE_SANITIZE MATCHES "address")
  set(PCACHE_ASAN ON)
  add_library(pcache_keep_modules OBJECT ${PROJECT_SOURCE_DIR}/tests/sanitize/keep_modules.c)
  target_compile_options(pcache_keep_modules PRIVATE ${PCACHE_WARNINGS})
endif()

# pcache_sanitize_executables(): called once at the end of the top-level
# CMakeLists, when every target exists. Walks all directories and links the
# module keeper into each executable.
function(pcache_sanitize_executables)
  if(NOT PCACHE_ASAN)
    return()
  endif()
  set(dirs ${PROJECT_SOURCE_DIR})
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${subdirs})
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t IN LISTS targets)
      get_target_property(type ${t} TYPE)
      if(type STREQUAL "EXECUTABLE")
        target_sources(${t} PRIVATE $<TARGET_OBJECTS:pcache_keep_modules>)
        target_link_options(${t} PRIVATE -Wl,--export-dynamic-symbol=dlclose)
      endif()
    endforeach()
  endwhile()
endfunction()
