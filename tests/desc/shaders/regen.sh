#!/bin/sh
# Regenerates ../spirv/*.h from the GLSL here. Changing the SPIR-V changes
# module hashes: regenerate tests/desc/golden.txt afterwards
# (test_desc_golden --update).
set -e
cd "$(dirname "$0")"
for s in vert frag comp tesc tese; do
  out=../spirv/spv_$s.h
  glslangValidator -V --vn spv_$s -o $out.tmp basic.$s >/dev/null
  {
    printf '/* Generated from ../shaders/basic.%s by glslangValidator -V --vn spv_%s; committed so\n' $s $s
    printf ' * that module hashes (and tests/desc/golden.txt) do not depend on the\n'
    printf ' * installed glslang. Regenerate with tests/desc/shaders/regen.sh. */\n'
    printf '#pragma once\n#include <stdint.h>\n'
    sed -e '1,2d' -e 's/^const uint32_t/static const uint32_t/' $out.tmp
  } >$out
  rm -f $out.tmp
done
