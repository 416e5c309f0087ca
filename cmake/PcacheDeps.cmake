# Every dependency comes from the distribution through pkg-config; Debian 12
# ships a .pc file for each of them.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

pkg_check_modules(LIBUV REQUIRED IMPORTED_TARGET libuv>=1.40)
pkg_check_modules(LMDB REQUIRED IMPORTED_TARGET lmdb)
pkg_check_modules(PROTOBUFC REQUIRED IMPORTED_TARGET libprotobuf-c>=1.3)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash>=0.8)
pkg_check_modules(VULKAN REQUIRED IMPORTED_TARGET vulkan)
pkg_check_modules(LIBSYSTEMD IMPORTED_TARGET libsystemd)
# pcached's fleet tier (daemon/fleet/, docs/fleet.md): required, so that
# every build can serve --remote; scripts/setup-deps.sh installs it.
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis>=0.14)
# The fleet tier's signatures (daemon/fleet/trust/remote_trust.c, docs/fleet.md "Who can
# do what"): Ed25519 and BLAKE2b. Linked by pcached and pcachectl (fleet
# keygen) through pcached_fleet_trust only, never by libpcache or the layer.
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium>=1.0.16)

find_program(PROTOC_C protoc-c REQUIRED)
find_program(GLSLANG_VALIDATOR glslangValidator)

if(LIBSYSTEMD_FOUND)
  set(PCACHE_HAVE_LIBSYSTEMD 1)
else()
  set(PCACHE_HAVE_LIBSYSTEMD 0)
endif()
