# Warnings every target in the tree compiles with. CI adds -Werror through
# PCACHE_WERROR so a new warning fails the build there, not on a user's machine.
set(PCACHE_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
    -Wpointer-arith -Wformat=2 -Wno-unused-parameter)
if(PCACHE_WERROR)
  list(APPEND PCACHE_WARNINGS -Werror)
endif()

# pcache_target_defaults(<target>): warnings and the include paths of the tree.
function(pcache_target_defaults target)
  target_compile_options(${target} PRIVATE ${PCACHE_WARNINGS})
  target_compile_definitions(${target} PRIVATE _GNU_SOURCE)
endfunction()
