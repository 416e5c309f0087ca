# Install layout: headers under include/pcache/, libpcache with SOVERSION,
# pcache.pc, a CMake package giving pcache::pcache, the programs in bin/
# (daemon/ and tools/ install those) and the systemd user units
# (systemd/CMakeLists.txt installs those), the docs and the manual pages.
# The components (runtime, devel, doc; none for the programs) decide which
# Debian package a file goes to (cmake/PcachePackage.cmake).
include(CMakePackageConfigHelpers)

install(FILES include/pcache/pcache.h ${PCACHE_GEN_DIR}/pcache/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pcache COMPONENT devel)

# In the build tree libpcache links Vulkan through pkg-config's imported
# target; a consumer of the installed package has no such target, so the
# exported interface names CMake's own Vulkan::Headers instead (the package
# config finds it with find_dependency(Vulkan)): libpcache does not link the
# loader, so neither need its consumers.
get_target_property(_pcache_iface pcache INTERFACE_LINK_LIBRARIES)
if(_pcache_iface)
  set(_pcache_iface_fixed)
  foreach(_lib IN LISTS _pcache_iface)
    if(_lib STREQUAL "PkgConfig::VULKAN")
      list(APPEND _pcache_iface_fixed "$<BUILD_INTERFACE:PkgConfig::VULKAN>"
           "$<INSTALL_INTERFACE:Vulkan::Headers>")
    else()
      list(APPEND _pcache_iface_fixed "${_lib}")
    endif()
  endforeach()
  set_property(TARGET pcache PROPERTY INTERFACE_LINK_LIBRARIES "${_pcache_iface_fixed}")
endif()

install(TARGETS pcache EXPORT pcacheTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
                NAMELINK_COMPONENT devel
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(EXPORT pcacheTargets NAMESPACE pcache::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pcache COMPONENT devel)

configure_package_config_file(cmake/pcacheConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/pcacheConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pcache)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/pcacheConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pcacheConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/pcacheConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pcache COMPONENT devel)

# pcache.pc finds its prefix from its own location (${pcfiledir}), so the
# tree can be installed with `cmake --install --prefix` anywhere, or moved.
# A distribution package, whose files stay where the package puts them,
# names the prefix itself (scripts/package.sh turns this OFF), so that
# pkg-config leaves out the system's own -I/usr/include and -L/usr/lib/...
option(PCACHE_PC_RELOCATABLE "pcache.pc finds its prefix from its own location" ON)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(PCACHE_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(PCACHE_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
elseif(NOT PCACHE_PC_RELOCATABLE)
  set(PCACHE_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(PCACHE_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH _pcache_pc_up "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" _pcache_pc_up "${_pcache_pc_up}")
  set(PCACHE_PC_PREFIX "\${pcfiledir}/${_pcache_pc_up}")
  set(PCACHE_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(PCACHE_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(PCACHE_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(cmake/pcache.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pcache.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pcache.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT devel)

# The documentation keeps the repository's layout under share/doc/pcache,
# so the relative links between the README, docs/ and the files they name
# resolve there as they do in the source tree (the install test follows
# every one): the top-level README.md and CONTRIBUTING.md, docs/ (whose
# index is docs/README.md; the units' Documentation= names
# docs/operations.md), bench/RESULTS.md with the pages it links to
# (bench/README.md, bench/HISTORY.md; not the logs in bench/results/), and
# the example program and the header the README sends readers to.
file(GLOB PCACHE_DOC_FILES ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES README.md CONTRIBUTING.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc)
install(FILES ${PCACHE_DOC_FILES} docs/pcachectl.1 docs/pcached.8 docs/pcache-replay.8
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT doc)
install(FILES bench/RESULTS.md bench/README.md bench/HISTORY.md bench/scenarios.svg
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/bench COMPONENT doc)
file(GLOB PCACHE_EXAMPLE_FILES ${PROJECT_SOURCE_DIR}/examples/*.c ${PROJECT_SOURCE_DIR}/examples/*.h)
install(FILES ${PCACHE_EXAMPLE_FILES} DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT doc)
install(FILES include/pcache/pcache.h DESTINATION ${CMAKE_INSTALL_DOCDIR}/include/pcache
        COMPONENT doc)

# The manual pages, compressed as Debian installs them (gzip -9n: no name or
# time stamp in the file, so a rebuild gives the same bytes); man reads
# either form. The uncompressed sources are also in the docs above.
find_program(PCACHE_GZIP gzip)
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/man)
foreach(_man IN ITEMS docs/pcachectl.1 docs/pcached.8 docs/pcache-replay.8)
  get_filename_component(_name ${_man} NAME)
  string(REGEX REPLACE ".*\\.([0-9])$" "\\1" _section ${_name})
  if(PCACHE_GZIP)
    set(_gz ${PROJECT_BINARY_DIR}/man/${_name}.gz)
    add_custom_command(OUTPUT ${_gz}
      COMMAND sh -c "\"$1\" -9n -c \"$2\" > \"$3\"" sh ${PCACHE_GZIP}
              ${PROJECT_SOURCE_DIR}/${_man} ${_gz}
      DEPENDS ${PROJECT_SOURCE_DIR}/${_man} VERBATIM)
    add_custom_target(man_${_name} ALL DEPENDS ${_gz})
    install(FILES ${_gz} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_section} COMPONENT doc)
  else()
    install(FILES ${_man} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_section} COMPONENT doc)
  endif()
endforeach()
