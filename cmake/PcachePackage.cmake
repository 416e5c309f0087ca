# Debian packages, made by CPack's DEB generator from exactly what
# `cmake --install` installs (docs/packaging.md says why CPack and not a
# debian/ directory). scripts/package.sh configures a build with
# CMAKE_INSTALL_PREFIX=/usr and runs cpack; two files come out:
#
#   pcache_<version>_<arch>.deb         everything that runs: pcached,
#       pcache-replay, pcachectl, libpcache.so.0, the Vulkan layer and its
#       manifest, the systemd user units (enabled for every user by the
#       maintainer scripts in cmake/deb/), the man pages and the docs;
#   libpcache-dev_<version>_<arch>.deb  what building against libpcache
#       needs: the headers, libpcache.so, pcache.pc and the CMake package.
#       It depends on libvulkan-dev, since pcache.h includes
#       <vulkan/vulkan.h>; the runtime package does not.
#
# The install rules' components decide the split: `devel` is the -dev
# package, every other one (runtime, doc and the rules that name none) is
# pcache.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME pcache)
set(CPACK_PACKAGE_VENDOR pcache)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Each package's description below starts with its own summary line; CPack
# would put this one in front of it unless it is CPack's own default.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_PACKAGE_CONTACT "pcache maintainers <maintainers@users.noreply.a-seed-6df9e2be.example>"
    CACHE STRING "The Maintainer field of the Debian packages")
# Files are owned by root in the archives whoever builds them (CPack writes
# the tar members itself: no fakeroot), and stripped: the build's -g goes
# into the build tree, not into users' /usr.
set(CPACK_STRIP_FILES ON)
set(CPACK_SET_DESTDIR OFF)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_COMPONENT_UNSPECIFIED_GROUP main)
set(CPACK_COMPONENT_RUNTIME_GROUP main)
set(CPACK_COMPONENT_DOC_GROUP main)
set(CPACK_COMPONENT_DEVEL_GROUP dev)
set(CPACK_COMPONENTS_ALL Unspecified runtime doc devel)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # name_version_arch.deb, as dpkg names them
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

# pcache: its library dependencies from dpkg-shlibdeps (libuv1, liblmdb0,
# libprotobuf-c1, libhiredis0.14, libsystemd0, libvulkan1 and libc6 on
# Debian 12; xxHash is compiled in), plus init-system-helpers for the maintainer
# scripts: `deb-systemd-helper --user` (1.52) and `deb-systemd-invoke
# --user` (1.61), as debhelper's dh_installsystemduser depends on it.
set(CPACK_DEBIAN_MAIN_PACKAGE_NAME pcache)
set(CPACK_DEBIAN_MAIN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_MAIN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_MAIN_PACKAGE_DEPENDS "init-system-helpers (>= 1.61~)")
set(CPACK_DEBIAN_MAIN_PACKAGE_SUGGESTS "vulkan-tools")
set(CPACK_DEBIAN_MAIN_DESCRIPTION
  "per-user Vulkan pipeline cache daemon, layer and library
pcache keeps the pipeline-cache blobs Vulkan drivers produce in a small
per-user daemon, pcached, so that the second time a program builds a
pipeline the driver gets it from a verified cache instead of compiling it.

This package holds pcached and pcache-replay, pcachectl, libpcache, the
implicit Vulkan layer VK_LAYER_PCACHE_pipeline_cache (off unless a program
runs with PCACHE_LAYER=1), the systemd user units pcached.socket and
pcached.service (the socket enabled for every user), the man pages and the
documentation.")
# A shlibs file for libpcache.so.0 (in pcache; libpcache-dev has no shared
# object), so that packages built against it depend on pcache.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# Given maintainer scripts replace the ldconfig calls CPack would write, so
# the ldconfig trigger (dpkg's way since 1.16, dh_makeshlibs's) is ours too.
set(CPACK_DEBIAN_MAIN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/cmake/deb/postinst
  ${PROJECT_SOURCE_DIR}/cmake/deb/prerm
  ${PROJECT_SOURCE_DIR}/cmake/deb/postrm
  ${PROJECT_SOURCE_DIR}/cmake/deb/triggers)
set(CPACK_DEBIAN_MAIN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libpcache-dev)
set(CPACK_DEBIAN_DEV_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "pcache (= ${PROJECT_VERSION}), libvulkan-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION
  "per-user Vulkan pipeline cache: development files for libpcache
pcache keeps the pipeline-cache blobs Vulkan drivers produce in a small
per-user daemon, pcached. Programs link libpcache to get their pipelines
from it.

This package holds the headers, libpcache.so, pcache.pc and the CMake
package (find_package(pcache), target pcache::pcache).")

include(CPack)
