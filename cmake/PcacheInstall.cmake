# Install layout: headers under include/pcache/, libpcache with SOVERSION,
# pcache.pc, a CMake package giving pcache::pcache, the programs in bin/ and
# the systemd user units (systemd/CMakeLists.txt installs those).
include(CMakePackageConfigHelpers)

install(FILES include/pcache/pcache.h ${PCACHE_GEN_DIR}/pcache/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pcache)

install(TARGETS pcache EXPORT pcacheTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(EXPORT pcacheTargets NAMESPACE pcache::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pcache)

configure_package_config_file(cmake/pcacheConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/pcacheConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pcache)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/pcacheConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pcacheConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/pcacheConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pcache)

configure_file(cmake/pcache.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pcache.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pcache.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
